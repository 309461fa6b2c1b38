package command

import (
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/domain"
)

// The commands of the template aggregate, sent on
// agents.cmd.template.<name> with the template id as the command's
// aggregateId (for CreateTemplate, the new template's id, chosen by the
// sender).
const (
	CreateTemplate      = "create_template"
	UpdateTemplate      = "update_template"
	AddRule             = "add_rule"
	RemoveRule          = "remove_rule"
	AddTool             = "add_tool"
	RemoveTool          = "remove_tool"
	AddTemplateSkill    = "add_template_skill"
	RemoveTemplateSkill = "remove_template_skill"
	ActivateTemplate    = "activate_template"
	DeactivateTemplate  = "deactivate_template"
)

// CreateTemplateData creates an active template.
type CreateTemplateData struct {
	Name         string   `json:"name"`
	Description  string   `json:"description,omitempty"`
	ModelID      string   `json:"modelId"`
	SystemPrompt string   `json:"systemPrompt,omitempty"`
	AllowedTools []string `json:"allowedTools"`
	// DefaultBudgetCapUsd is the hard cap of the template's sessions.
	DefaultBudgetCapUsd domain.USD `json:"defaultBudgetCapUsd"`
	// WarnAtPercent defaults to domain.DefaultWarnAtPercent.
	WarnAtPercent         int                        `json:"warnAtPercent,omitempty"`
	CustomToolDefinitions []ToolDefinition           `json:"customToolDefinitions,omitempty"`
	DefaultSkillIDs       []uuid.UUID                `json:"defaultSkillIds,omitempty"`
	DefaultAutoContinue   *domain.AutoContinueConfig `json:"defaultAutoContinue,omitempty"`
	PlanApprovalRequired  bool                       `json:"planApprovalRequired,omitempty"`
	ClassificationRules   []RuleData                 `json:"classificationRules,omitempty"`
	Schedule              *domain.AgentSchedule      `json:"schedule,omitempty"`
	ToolApproval          *domain.ToolApprovalPolicy `json:"toolApproval,omitempty"`
	Timeouts              *domain.SessionTimeouts    `json:"timeouts,omitempty"`
	SandboxLimits         *domain.SandboxLimits      `json:"sandboxLimits,omitempty"`
}

// UpdateTemplateData changes the fields that are set, all or nothing.
type UpdateTemplateData struct {
	Name                 *string                    `json:"name,omitempty"`
	Description          *string                    `json:"description,omitempty"`
	ModelID              *string                    `json:"modelId,omitempty"`
	SystemPrompt         *string                    `json:"systemPrompt,omitempty"`
	AllowedTools         *[]string                  `json:"allowedTools,omitempty"`
	DefaultBudgetCapUsd  *domain.USD                `json:"defaultBudgetCapUsd,omitempty"`
	WarnAtPercent        *int                       `json:"warnAtPercent,omitempty"`
	PlanApprovalRequired *bool                      `json:"planApprovalRequired,omitempty"`
	DefaultAutoContinue  *domain.AutoContinueConfig `json:"defaultAutoContinue,omitempty"`
	ToolApproval         *domain.ToolApprovalPolicy `json:"toolApproval,omitempty"`
	Timeouts             *domain.SessionTimeouts    `json:"timeouts,omitempty"`
	SandboxLimits        *domain.SandboxLimits      `json:"sandboxLimits,omitempty"`
	// Schedule sets the schedule; RemoveSchedule makes the template
	// on-demand again.
	Schedule       *domain.AgentSchedule `json:"schedule,omitempty"`
	RemoveSchedule bool                  `json:"removeSchedule,omitempty"`
}

// RuleData is a classification rule. RuleID is optional; by default it is
// derived from the command id (and shown in the template's state).
type RuleData struct {
	RuleID       uuid.UUID `json:"ruleId,omitempty"`
	MatchField   string    `json:"matchField"`
	MatchPattern string    `json:"matchPattern"`
	ClassifyAs   string    `json:"classifyAs"`
	MinPriority  string    `json:"minPriority,omitempty"`
}

// RuleIDData names a classification rule.
type RuleIDData struct {
	RuleID uuid.UUID `json:"ruleId"`
}

// ToolNameData names an MCP tool of the template.
type ToolNameData struct {
	ToolName string `json:"toolName"`
}

// TemplateState is what a template command returns: the template's state.
type TemplateState = domain.AgentTemplateSnapshot
