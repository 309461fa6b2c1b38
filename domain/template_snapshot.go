package domain

import (
	"slices"
	"time"

	"github.com/google/uuid"
)

// ID returns the template id.
func (t *AgentTemplate) ID() uuid.UUID { return t.id }

// OwnerID returns the template's owner.
func (t *AgentTemplate) OwnerID() uuid.UUID { return t.ownerID }

// Name returns the template's name.
func (t *AgentTemplate) Name() string { return t.name }

// Description returns the description, or "".
func (t *AgentTemplate) Description() string { return t.description }

// ModelID returns the default model of the template's sessions.
func (t *AgentTemplate) ModelID() string { return t.modelID }

// SystemPrompt returns the base instructions, placed before skills'.
func (t *AgentTemplate) SystemPrompt() string { return t.systemPrompt }

// AllowedTools returns the tool names the agent may use.
func (t *AgentTemplate) AllowedTools() []string { return slices.Clone(t.allowedTools) }

// CustomToolDefinitions returns the template's MCP tools.
func (t *AgentTemplate) CustomToolDefinitions() []MCPToolDefinition {
	return slices.Clone(t.customTools)
}

// DefaultSkillIDs returns the skills enabled on new sessions, in order.
func (t *AgentTemplate) DefaultSkillIDs() []uuid.UUID { return cloneIDs(t.defaultSkillIDs) }

// DefaultAutoContinue returns the default auto-continue settings, or nil.
func (t *AgentTemplate) DefaultAutoContinue() *AutoContinueConfig {
	return cloneAutoContinue(t.defaultAutoContinue)
}

// PlanApprovalRequired reports whether submitted plans wait for the owner.
func (t *AgentTemplate) PlanApprovalRequired() bool { return t.planApprovalRequired }

// ClassificationRules returns the template's rules.
func (t *AgentTemplate) ClassificationRules() []ClassificationRule { return slices.Clone(t.rules) }

// Schedule returns the schedule, or nil for an on-demand template.
func (t *AgentTemplate) Schedule() *AgentSchedule { return clonePtr(t.schedule) }

// ScheduleSince returns when the schedule last started to be in force:
// when it was set or changed, or the template activated.
func (t *AgentTemplate) ScheduleSince() time.Time { return t.scheduleSince }

// DefaultBudget returns the per-session budget of the template's sessions.
func (t *AgentTemplate) DefaultBudget() SessionBudget { return t.defaultBudget }

// ToolApproval returns the default tool approval policy.
func (t *AgentTemplate) ToolApproval() ToolApprovalPolicy { return t.toolApproval.clone() }

// Timeouts returns the default waiting limits.
func (t *AgentTemplate) Timeouts() SessionTimeouts { return t.timeouts }

// IsActive reports whether the template may create sessions.
func (t *AgentTemplate) IsActive() bool { return t.isActive }

// CreatedAt returns when the template was created.
func (t *AgentTemplate) CreatedAt() time.Time { return t.createdAt }

// UpdatedAt returns when the template last changed.
func (t *AgentTemplate) UpdatedAt() time.Time { return t.updatedAt }

// Version returns the storage version, for the optimistic lock.
func (t *AgentTemplate) Version() int64 { return t.version }

// AgentTemplateSnapshot is the stored state of a template.
type AgentTemplateSnapshot struct {
	ID                    uuid.UUID            `json:"id"`
	OwnerID               uuid.UUID            `json:"ownerId"`
	Name                  string               `json:"name"`
	Description           string               `json:"description,omitempty"`
	ModelID               string               `json:"modelId"`
	SystemPrompt          string               `json:"systemPrompt,omitempty"`
	AllowedTools          []string             `json:"allowedTools"`
	CustomToolDefinitions []MCPToolDefinition  `json:"customToolDefinitions"`
	DefaultSkillIDs       []uuid.UUID          `json:"defaultSkillIds"`
	DefaultAutoContinue   *AutoContinueConfig  `json:"defaultAutoContinue,omitempty"`
	PlanApprovalRequired  bool                 `json:"planApprovalRequired"`
	ClassificationRules   []ClassificationRule `json:"classificationRules"`
	Schedule              *AgentSchedule       `json:"schedule,omitempty"`
	// ScheduleSince is when the schedule last started to be in force; a
	// template stored before it was recorded reads its UpdatedAt instead.
	ScheduleSince time.Time          `json:"scheduleSince"`
	DefaultBudget SessionBudget      `json:"defaultBudget"`
	ToolApproval  ToolApprovalPolicy `json:"toolApproval"`
	Timeouts      SessionTimeouts    `json:"timeouts"`
	SandboxLimits SandboxLimits      `json:"sandboxLimits,omitempty"`
	IsActive      bool               `json:"isActive"`
	CreatedAt     time.Time          `json:"createdAt"`
	UpdatedAt     time.Time          `json:"updatedAt"`
	Version       int64              `json:"version"`
}

// Snapshot returns the template as plain values.
func (t *AgentTemplate) Snapshot() AgentTemplateSnapshot {
	return AgentTemplateSnapshot{ID: t.id, OwnerID: t.ownerID, Name: t.name, Description: t.description,
		ModelID: t.modelID, SystemPrompt: t.systemPrompt, AllowedTools: t.AllowedTools(),
		CustomToolDefinitions: t.CustomToolDefinitions(), DefaultSkillIDs: t.DefaultSkillIDs(),
		DefaultAutoContinue: t.DefaultAutoContinue(), PlanApprovalRequired: t.planApprovalRequired,
		ClassificationRules: t.ClassificationRules(), Schedule: t.Schedule(), ScheduleSince: t.scheduleSince, DefaultBudget: t.defaultBudget,
		ToolApproval: t.ToolApproval(), Timeouts: t.timeouts, SandboxLimits: t.sandboxLimits, IsActive: t.isActive,
		CreatedAt: t.createdAt, UpdatedAt: t.updatedAt, Version: t.version}
}

// UnmarshalAgentTemplateFromDatabase rebuilds a stored template, checking
// the invariants the model guarantees.
func UnmarshalAgentTemplateFromDatabase(snap AgentTemplateSnapshot) (*AgentTemplate, error) {
	if err := requireID("id", snap.ID); err != nil {
		return nil, err
	}
	if err := requireID("ownerId", snap.OwnerID); err != nil {
		return nil, err
	}
	if snap.Name == "" || snap.ModelID == "" || len(snap.AllowedTools) == 0 {
		return nil, invalid("template", "name, model and at least one allowed tool must be set")
	}
	if err := snap.DefaultBudget.Validate(); err != nil {
		return nil, err
	}
	if err := snap.ToolApproval.Validate(); err != nil {
		return nil, err
	}
	if err := snap.Timeouts.Validate(); err != nil {
		return nil, err
	}
	if err := snap.SandboxLimits.Validate(); err != nil {
		return nil, err
	}
	if !uniqueBy(snap.CustomToolDefinitions, func(d MCPToolDefinition) string { return d.Name }) ||
		!uniqueBy(snap.ClassificationRules, func(r ClassificationRule) string { return r.ID.String() }) {
		return nil, invalid("template", "tool names and rule ids must be unique")
	}
	if snap.ScheduleSince.IsZero() {
		snap.ScheduleSince = snap.UpdatedAt
	}
	return &AgentTemplate{id: snap.ID, ownerID: snap.OwnerID, name: snap.Name, description: snap.Description,
		modelID: snap.ModelID, systemPrompt: snap.SystemPrompt, allowedTools: slices.Clone(snap.AllowedTools),
		customTools: slices.Clone(snap.CustomToolDefinitions), defaultSkillIDs: cloneIDs(snap.DefaultSkillIDs),
		defaultAutoContinue: cloneAutoContinue(snap.DefaultAutoContinue), planApprovalRequired: snap.PlanApprovalRequired,
		rules: slices.Clone(snap.ClassificationRules), schedule: clonePtr(snap.Schedule), scheduleSince: snap.ScheduleSince, defaultBudget: snap.DefaultBudget,
		toolApproval: snap.ToolApproval.clone(), timeouts: snap.Timeouts, sandboxLimits: snap.SandboxLimits, isActive: snap.IsActive,
		createdAt: snap.CreatedAt, updatedAt: snap.UpdatedAt, version: snap.Version}, nil
}
