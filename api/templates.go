package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres/queries"
)

// templateNamespace derives a new template's id from the id of the
// command that creates it, so a repeated create names the same template.
var templateNamespace = uuid.MustParse("c4d5e6f7-0a1b-4c2d-9e3f-4a5b6c7d8e9f")

// TemplateRequest creates a template (CreateAgentTemplateCommand).
type TemplateRequest struct {
	Name                  string                  `json:"name" minLength:"1" maxLength:"100" doc:"The template's name." example:"Backend feature"`
	Description           string                  `json:"description,omitempty" maxLength:"2000" doc:"What the template is for." example:"Go backend work with tests and lint."`
	ModelID               string                  `json:"modelId" minLength:"1" maxLength:"200" doc:"The model of the template's sessions." example:"claude-sonnet-4-5"`
	SystemPrompt          string                  `json:"systemPrompt,omitempty" maxLength:"50000" doc:"Base instructions of every session, before the skills'." example:"You work on a Go monorepo; run make check before finishing."`
	AllowedTools          []string                `json:"allowedTools" minItems:"1" maxItems:"100" doc:"The tools the agent may use." example:"[\"Read\",\"Edit\",\"Bash\"]"`
	DefaultBudgetCapUsd   float64                 `json:"defaultBudgetCapUsd" exclusiveMinimum:"0" maximum:"1000000" doc:"The spending cap of each session, in US dollars." example:"10"`
	WarnAtPercent         int                     `json:"warnAtPercent,omitempty" minimum:"1" maximum:"99" doc:"The share of the cap at which you are warned; 80 by default." example:"80"`
	CustomToolDefinitions []ToolDefinitionRequest `json:"customToolDefinitions,omitempty" maxItems:"50" doc:"MCP tools the sessions get besides the allowed ones."`
	DefaultSkillIDs       []uuid.UUID             `json:"defaultSkillIds,omitempty" maxItems:"50" format:"uuid" doc:"Your skills enabled on every session of the template."`
	DefaultAutoContinue   *AutoContinueRequest    `json:"defaultAutoContinue,omitempty" doc:"The sessions' validate-and-continue loop."`
	PlanApprovalRequired  bool                    `json:"planApprovalRequired,omitempty" doc:"Whether the agent's plans wait for your approval." example:"true"`
	ClassificationRules   []RuleRequest           `json:"classificationRules,omitempty" maxItems:"100" doc:"Rules of an automation template (email triage, for one)."`
	Schedule              *ScheduleRequest        `json:"schedule,omitempty" doc:"When a scheduled automation runs; none for an on-demand template."`
	ToolApproval          *ToolApprovalRequest    `json:"toolApproval,omitempty" doc:"Which tool uses wait for your approval; none by default."`
	Timeouts              *TimeoutsRequest        `json:"timeouts,omitempty" doc:"How long the sessions wait for you; 24 hours for answers and 10 minutes in pause by default."`
	SandboxLimits         *SandboxLimits          `json:"sandboxLimits,omitempty" doc:"Limits of the sandbox each session's agent runs in; the deployment's by default."`
}

// UpdateTemplateRequest changes a template; the fields left out keep
// their value. Either every change applies or none does.
type UpdateTemplateRequest struct {
	Name                 *string              `json:"name,omitempty" minLength:"1" maxLength:"100" doc:"The new name." example:"Backend feature"`
	Description          *string              `json:"description,omitempty" maxLength:"2000" doc:"The new description." example:"Go backend work with tests and lint."`
	ModelID              *string              `json:"modelId,omitempty" minLength:"1" maxLength:"200" doc:"The new model." example:"claude-opus-4-5"`
	SystemPrompt         *string              `json:"systemPrompt,omitempty" maxLength:"50000" doc:"The new base instructions." example:"Run make check before finishing."`
	AllowedTools         []string             `json:"allowedTools,omitempty" minItems:"1" maxItems:"100" doc:"The new allowed tools." example:"[\"Read\",\"Edit\"]"`
	DefaultBudgetCapUsd  *float64             `json:"defaultBudgetCapUsd,omitempty" exclusiveMinimum:"0" maximum:"1000000" doc:"The new spending cap of each session, in US dollars." example:"15"`
	WarnAtPercent        *int                 `json:"warnAtPercent,omitempty" minimum:"1" maximum:"99" doc:"The new warning threshold." example:"90"`
	PlanApprovalRequired *bool                `json:"planApprovalRequired,omitempty" doc:"Whether plans wait for your approval." example:"false"`
	DefaultAutoContinue  *AutoContinueRequest `json:"defaultAutoContinue,omitempty" doc:"The new validate-and-continue loop."`
	ToolApproval         *ToolApprovalRequest `json:"toolApproval,omitempty" doc:"The new tool approval policy."`
	Timeouts             *TimeoutsRequest     `json:"timeouts,omitempty" doc:"The new waiting limits."`
	SandboxLimits        *SandboxLimits       `json:"sandboxLimits,omitempty" doc:"The new limits of the sessions' sandboxes; zero fields take the deployment's."`
	Schedule             *ScheduleRequest     `json:"schedule,omitempty" doc:"The new schedule."`
	RemoveSchedule       bool                 `json:"removeSchedule,omitempty" doc:"Make the template on-demand again." example:"false"`
}

// RuleRequest is a classification rule (ClassificationRule).
type RuleRequest struct {
	MatchField   string `json:"matchField" minLength:"1" maxLength:"200" doc:"The field of the incoming item the rule looks at." example:"subject"`
	MatchPattern string `json:"matchPattern" minLength:"1" maxLength:"1000" doc:"The pattern the field must match." example:"(?i)invoice"`
	ClassifyAs   string `json:"classifyAs" maxLength:"200" doc:"The class a matching item gets." example:"billing"`
	MinPriority  string `json:"minPriority,omitempty" maxLength:"50" doc:"The lowest priority the rule applies to." example:"High"`
}

// ScheduleRequest says when a scheduled automation runs (AgentSchedule).
type ScheduleRequest struct {
	CronExpression string `json:"cronExpression" minLength:"1" maxLength:"200" doc:"A five-field cron expression: minute hour day-of-month month day-of-week." example:"0 8 * * 1-5"`
	TimeZone       string `json:"timeZone" minLength:"1" maxLength:"100" doc:"The IANA time zone the expression is read in." example:"Europe/Lisbon"`
	IsEnabled      bool   `json:"isEnabled" doc:"Whether the schedule runs." example:"true"`
}

// SandboxLimits are the limits of the sandbox a template's sessions run
// in; a zero field is the deployment's.
type SandboxLimits struct {
	MaxProcesses int   `json:"maxProcesses,omitempty" minimum:"0" maximum:"100000" doc:"Processes one session's sandbox may hold; 0 for the deployment's (512 by default)." example:"256"`
	MaxMemoryMiB int64 `json:"maxMemoryMiB,omitempty" minimum:"0" maximum:"1048576" doc:"Memory, in MiB, each process of the sandbox may allocate; 0 for the deployment's (4096 by default)." example:"2048"`
}

func sandboxLimitsOf(l *SandboxLimits) *domain.SandboxLimits {
	if l == nil {
		return nil
	}
	return &domain.SandboxLimits{MaxProcesses: l.MaxProcesses, MaxMemoryMiB: l.MaxMemoryMiB}
}

// TimeoutsRequest sets how long sessions wait for their owner.
type TimeoutsRequest struct {
	InputSeconds  int64  `json:"inputSeconds,omitempty" minimum:"1" maximum:"2592000" doc:"How long a question waits for an answer; 86400 by default." example:"86400"`
	DefaultAnswer string `json:"defaultAnswer,omitempty" maxLength:"4000" doc:"The answer given to a question nobody answered in time; without one the session fails." example:"Use your best judgement."`
	PauseSeconds  int64  `json:"pauseSeconds,omitempty" minimum:"1" maximum:"2592000" doc:"How long a session may stay Paused before it fails; 600 by default." example:"600"`
}

type createTemplateInput struct {
	Body TemplateRequest
}

type createTemplateOutput struct {
	Location string `header:"Location" doc:"The new template's URL." example:"/api/agents/templates/3c9d2e1f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"`
	Body     TemplateDetail
}

type listTemplatesInput struct {
	IsActive string `query:"isActive" enum:"true,false" doc:"Only the active (true) or deactivated (false) templates." example:"true"`
	Page     int    `query:"page" minimum:"1" default:"1" doc:"The page, from 1." example:"1"`
	PageSize int    `query:"pageSize" minimum:"1" maximum:"100" default:"20" doc:"Templates per page." example:"20"`
}

type templateIDInput struct {
	ID string `path:"id" format:"uuid" doc:"The template's id." example:"3c9d2e1f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"`
}

type updateTemplateInput struct {
	ID   string `path:"id" format:"uuid" doc:"The template's id." example:"3c9d2e1f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"`
	Body UpdateTemplateRequest
}

type addRuleInput struct {
	ID   string `path:"id" format:"uuid" doc:"The template's id." example:"3c9d2e1f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"`
	Body RuleRequest
}

type templateRuleInput struct {
	ID     string `path:"id" format:"uuid" doc:"The template's id." example:"3c9d2e1f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"`
	RuleID string `path:"ruleId" format:"uuid" doc:"The rule's id." example:"9a0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d"`
}

type addToolInput struct {
	ID   string `path:"id" format:"uuid" doc:"The template's id." example:"3c9d2e1f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"`
	Body ToolDefinitionRequest
}

type templateToolInput struct {
	ID       string `path:"id" format:"uuid" doc:"The template's id." example:"3c9d2e1f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"`
	ToolName string `path:"toolName" maxLength:"100" doc:"The MCP tool's name." example:"search_tickets"`
}

type templateSkillInput struct {
	ID      string `path:"id" format:"uuid" doc:"The template's id." example:"3c9d2e1f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"`
	SkillID string `path:"skillId" format:"uuid" doc:"The skill's id." example:"5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b"`
}

type templateListOutput struct{ Body TemplateList }
type templateOutput struct{ Body TemplateDetail }

// templateFields renames the domain's field names to the request's.
var templateFields = map[string]string{
	"budget.hardCapUsd":                             "defaultBudgetCapUsd",
	"budget.warnAtPercent":                          "warnAtPercent",
	"autoContinue.maxContinuations":                 "defaultAutoContinue.maxContinuations",
	"autoContinue.validationCriteria.threshold":     "defaultAutoContinue.validationCriteria.threshold",
	"autoContinue.validationCriteria.type":          "defaultAutoContinue.validationCriteria.type",
	"autoContinue.validationCriteria.customCommand": "defaultAutoContinue.validationCriteria.customCommand",
	"toolApproval.timeout":                          "toolApproval.timeoutSeconds",
	"timeouts.input":                                "timeouts.inputSeconds",
	"timeouts.pause":                                "timeouts.pauseSeconds",
}

// addTemplateRoutes registers the template catalog: create, read, edit,
// its rules, MCP tools and default skills, and (de)activation.
func (s *Server) addTemplateRoutes(api huma.API) {
	create := humanOp("create-template", http.MethodPost, "/api/agents/templates", "Create a template",
		"Creates an active template: the model, tools, budget, default skills and prompt sessions can start from.", "Templates", commandErrors)
	create.DefaultStatus = http.StatusCreated
	register(api, create, s.createTemplate)
	register(api, humanOp("list-templates", http.MethodGet, "/api/agents/templates", "List your templates",
		"Your templates by name, optionally only the active or the deactivated ones.", "Templates", listErrors), s.listTemplates)
	register(api, humanOp("get-template", http.MethodGet, "/api/agents/templates/{id}", "Get a template",
		"One of your templates with its whole configuration.", "Templates", queryErrors), s.getTemplate)
	register(api, humanOp("update-template", http.MethodPut, "/api/agents/templates/{id}", "Update a template",
		"Changes the fields given, all or none; the fields left out keep their value.", "Templates", commandErrors), s.updateTemplate)
	register(api, humanOp("add-template-rule", http.MethodPost, "/api/agents/templates/{id}/rules", "Add a classification rule",
		"Adds a classification rule; the answer shows it with its new id.", "Templates", commandErrors),
		func(ctx context.Context, in *addRuleInput) (*templateOutput, error) {
			return s.templateCommand(ctx, in.ID, command.AddRule, ruleData(in.Body), map[string]string{
				"classificationRules.matchField": "matchField", "classificationRules.matchPattern": "matchPattern"})
		})
	register(api, humanOp("remove-template-rule", http.MethodDelete, "/api/agents/templates/{id}/rules/{ruleId}", "Remove a classification rule",
		"Removes one of the template's classification rules.", "Templates", commandErrors),
		func(ctx context.Context, in *templateRuleInput) (*templateOutput, error) {
			rule, err := parseID("path.ruleId", in.RuleID)
			if err != nil {
				return nil, err
			}
			return s.templateCommand(ctx, in.ID, command.RemoveRule, command.RuleIDData{RuleID: rule}, nil)
		})
	register(api, humanOp("add-template-tool", http.MethodPost, "/api/agents/templates/{id}/tools", "Add an MCP tool",
		"Registers an MCP tool for the template's sessions; its name must be new to the template, its input schema a JSON Schema "+
			"of type object and its server URI an http or https URL that points to no cloud metadata service, link-local address, "+
			"or (unless the operator allows them) loopback or private address.", "Templates", commandErrors),
		func(ctx context.Context, in *addToolInput) (*templateOutput, error) {
			tool, err := s.toolDefinitionOf("", in.Body)
			if err != nil {
				return nil, err
			}
			return s.templateCommand(ctx, in.ID, command.AddTool, tool, nil)
		})
	register(api, humanOp("remove-template-tool", http.MethodDelete, "/api/agents/templates/{id}/tools/{toolName}", "Remove an MCP tool",
		"Removes one of the template's MCP tools.", "Templates", commandErrors),
		func(ctx context.Context, in *templateToolInput) (*templateOutput, error) {
			return s.templateCommand(ctx, in.ID, command.RemoveTool, command.ToolNameData{ToolName: in.ToolName}, nil)
		})
	register(api, humanOp("add-template-skill", http.MethodPost, "/api/agents/templates/{id}/skills/{skillId}", "Add a default skill",
		"Adds one of your skills to the skills enabled on the template's sessions.", "Templates", commandErrors),
		func(ctx context.Context, in *templateSkillInput) (*templateOutput, error) {
			return s.templateSkillCommand(ctx, in, command.AddTemplateSkill)
		})
	register(api, humanOp("remove-template-skill", http.MethodDelete, "/api/agents/templates/{id}/skills/{skillId}", "Remove a default skill",
		"Removes a skill from the skills enabled on the template's sessions.", "Templates", commandErrors),
		func(ctx context.Context, in *templateSkillInput) (*templateOutput, error) {
			return s.templateSkillCommand(ctx, in, command.RemoveTemplateSkill)
		})
	register(api, humanOp("deactivate-template", http.MethodPost, "/api/agents/templates/{id}/deactivate", "Deactivate a template",
		"No new session can start from the template; its sessions go on.", "Templates", commandErrors),
		func(ctx context.Context, in *templateIDInput) (*templateOutput, error) {
			return s.templateCommand(ctx, in.ID, command.DeactivateTemplate, nil, nil)
		})
	register(api, humanOp("activate-template", http.MethodPost, "/api/agents/templates/{id}/activate", "Activate a template",
		"Lets sessions start from a deactivated template again.", "Templates", commandErrors),
		func(ctx context.Context, in *templateIDInput) (*templateOutput, error) {
			return s.templateCommand(ctx, in.ID, command.ActivateTemplate, nil, nil)
		})
}

func (s *Server) createTemplate(ctx context.Context, in *createTemplateInput) (*createTemplateOutput, error) {
	b := in.Body
	budget, err := domain.USDFromFloat(b.DefaultBudgetCapUsd)
	if err != nil {
		return nil, NewKindError(KindValidation, "defaultBudgetCapUsd must be a finite amount").WithField("defaultBudgetCapUsd")
	}
	tools, err := s.toolDefinitionsOf("customToolDefinitions", b.CustomToolDefinitions)
	if err != nil {
		return nil, err
	}
	data := command.CreateTemplateData{Name: b.Name, Description: b.Description, ModelID: b.ModelID,
		SystemPrompt: b.SystemPrompt, AllowedTools: b.AllowedTools, DefaultBudgetCapUsd: budget, WarnAtPercent: b.WarnAtPercent,
		CustomToolDefinitions: tools, DefaultSkillIDs: b.DefaultSkillIDs, DefaultAutoContinue: autoContinueOf(b.DefaultAutoContinue),
		PlanApprovalRequired: b.PlanApprovalRequired, Schedule: scheduleOf(b.Schedule), ToolApproval: toolApprovalFrom(b.ToolApproval),
		Timeouts: timeoutsOf(b.Timeouts), SandboxLimits: sandboxLimitsOf(b.SandboxLimits)}
	for _, r := range b.ClassificationRules {
		data.ClassificationRules = append(data.ClassificationRules, ruleData(r))
	}
	cmdID := CommandID(ctx)
	id := uuid.NewSHA1(templateNamespace, cmdID[:])
	raw, err := s.send(ctx, domain.AggregateTemplate, command.CreateTemplate, id, data, templateFields)
	if err != nil {
		return nil, err
	}
	snap, err := decodeState[command.TemplateState](raw)
	if err != nil {
		return nil, err
	}
	return &createTemplateOutput{Location: "/api/agents/templates/" + snap.ID.String(), Body: templateDetailOf(snap, s.cfg.Now())}, nil
}

func (s *Server) listTemplates(ctx context.Context, in *listTemplatesInput) (*templateListOutput, error) {
	owner, err := s.reader(ctx)
	if err != nil {
		return nil, err
	}
	page, err := s.deps.Queries.ListTemplates(ctx, queries.ListTemplatesParams{Owner: owner, IsActive: isActiveFilter(in.IsActive),
		Paging: queries.Paging{Page: in.Page, PageSize: in.PageSize}})
	if err != nil {
		return nil, err
	}
	out := &templateListOutput{Body: TemplateList{Items: make([]TemplateSummary, 0, len(page.Items)),
		Total: page.Total, Page: page.Page, PageSize: page.PageSize}}
	for _, t := range page.Items {
		out.Body.Items = append(out.Body.Items, TemplateSummary{ID: t.ID, Name: t.Name, Description: t.Description,
			ModelID: t.ModelID, IsActive: t.IsActive, PlanApprovalRequired: t.PlanApprovalRequired,
			DefaultBudgetCapUsd: usd(t.DefaultBudgetCapUsd), AllowedToolCount: t.AllowedToolCount,
			CustomToolCount: t.CustomToolCount, DefaultSkillCount: t.DefaultSkillCount, RuleCount: t.RuleCount,
			Scheduled: t.Scheduled, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt})
	}
	return out, nil
}

func (s *Server) getTemplate(ctx context.Context, in *templateIDInput) (*templateOutput, error) {
	owner, id, err := s.readOwned(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	snap, err := s.deps.Queries.Template(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return &templateOutput{Body: templateDetailOf(snap, s.cfg.Now())}, nil
}

func (s *Server) updateTemplate(ctx context.Context, in *updateTemplateInput) (*templateOutput, error) {
	b := in.Body
	data := command.UpdateTemplateData{Name: b.Name, Description: b.Description, ModelID: b.ModelID,
		SystemPrompt: b.SystemPrompt, WarnAtPercent: b.WarnAtPercent, PlanApprovalRequired: b.PlanApprovalRequired,
		DefaultAutoContinue: autoContinueOf(b.DefaultAutoContinue), ToolApproval: toolApprovalFrom(b.ToolApproval),
		Timeouts: timeoutsOf(b.Timeouts), Schedule: scheduleOf(b.Schedule), RemoveSchedule: b.RemoveSchedule,
		SandboxLimits: sandboxLimitsOf(b.SandboxLimits)}
	if b.AllowedTools != nil {
		data.AllowedTools = &b.AllowedTools
	}
	if b.DefaultBudgetCapUsd != nil {
		budget, err := domain.USDFromFloat(*b.DefaultBudgetCapUsd)
		if err != nil {
			return nil, NewKindError(KindValidation, "defaultBudgetCapUsd must be a finite amount").WithField("defaultBudgetCapUsd")
		}
		data.DefaultBudgetCapUsd = &budget
	}
	if b.Schedule != nil && b.RemoveSchedule {
		return nil, NewKindError(KindValidation, "give a schedule or removeSchedule, not both").WithField("removeSchedule")
	}
	return s.templateCommand(ctx, in.ID, command.UpdateTemplate, data, templateFields)
}

func (s *Server) templateSkillCommand(ctx context.Context, in *templateSkillInput, name string) (*templateOutput, error) {
	skill, err := parseID("path.skillId", in.SkillID)
	if err != nil {
		return nil, err
	}
	return s.templateCommand(ctx, in.ID, name, command.SkillData{SkillID: skill}, map[string]string{"skillId": "path.skillId"})
}

// templateCommand sends a template command for the caller and answers
// the template's new state.
func (s *Server) templateCommand(ctx context.Context, rawID, name string, data any, fields map[string]string) (*templateOutput, error) {
	id, err := parseID("path.id", rawID)
	if err != nil {
		return nil, err
	}
	raw, err := s.send(ctx, domain.AggregateTemplate, name, id, data, fields)
	if err != nil {
		return nil, err
	}
	snap, err := decodeState[command.TemplateState](raw)
	if err != nil {
		return nil, err
	}
	return &templateOutput{Body: templateDetailOf(snap, s.cfg.Now())}, nil
}

func ruleData(r RuleRequest) command.RuleData {
	return command.RuleData{MatchField: r.MatchField, MatchPattern: r.MatchPattern, ClassifyAs: r.ClassifyAs, MinPriority: r.MinPriority}
}

func autoContinueOf(a *AutoContinueRequest) *domain.AutoContinueConfig {
	if a == nil {
		return nil
	}
	cfg := &domain.AutoContinueConfig{MaxContinuations: a.MaxContinuations, IsEnabled: a.IsEnabled,
		ValidationCriteria: []domain.ValidationCriterion{}}
	if cfg.MaxContinuations == 0 {
		cfg.MaxContinuations = domain.DefaultMaxContinuations
	}
	for _, c := range a.ValidationCriteria {
		cfg.ValidationCriteria = append(cfg.ValidationCriteria, domain.ValidationCriterion{
			Type: domain.ValidationType(c.Type), Threshold: c.Threshold, CustomCommand: c.CustomCommand})
	}
	return cfg
}

func toolApprovalFrom(t *ToolApprovalRequest) *domain.ToolApprovalPolicy {
	if t == nil {
		return nil
	}
	policy := domain.DefaultToolApprovalPolicy()
	policy.Mode, policy.Tools = domain.ApprovalMode(t.Mode), t.Tools
	if t.TimeoutSeconds > 0 {
		policy.Timeout = time.Duration(t.TimeoutSeconds) * time.Second
	}
	if t.OnTimeout != "" {
		policy.OnTimeout = domain.PermissionTimeoutBehavior(t.OnTimeout)
	}
	return &policy
}

func scheduleOf(s *ScheduleRequest) *domain.AgentSchedule {
	if s == nil {
		return nil
	}
	return &domain.AgentSchedule{CronExpression: s.CronExpression, TimeZone: s.TimeZone, IsEnabled: s.IsEnabled}
}

func timeoutsOf(t *TimeoutsRequest) *domain.SessionTimeouts {
	if t == nil {
		return nil
	}
	out := domain.DefaultSessionTimeouts()
	out.DefaultAnswer = t.DefaultAnswer
	if t.InputSeconds > 0 {
		out.Input = time.Duration(t.InputSeconds) * time.Second
	}
	if t.PauseSeconds > 0 {
		out.Pause = time.Duration(t.PauseSeconds) * time.Second
	}
	return &out
}
