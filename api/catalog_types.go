package api

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/domain/schedule"
)

// The response shapes of skills and templates, and what they share: MCP
// tool definitions and the isActive filter of their lists.

// ToolDefinitionRequest declares an MCP tool (McpToolDefinition).
type ToolDefinitionRequest struct {
	Name        string         `json:"name" minLength:"1" maxLength:"100" doc:"The tool's name, unique among the tools it is added to." example:"search_tickets"`
	Description string         `json:"description" minLength:"1" maxLength:"500" doc:"What the tool does, for the agent." example:"Searches the support tickets by text."`
	InputSchema map[string]any `json:"inputSchema" doc:"The tool's input: a JSON Schema with \"type\": \"object\"."`
	ServerURI   string         `json:"serverUri" minLength:"1" maxLength:"2048" doc:"The http or https URL of the MCP server serving the tool; not a cloud metadata service, link-local address or (unless the operator allows them) loopback or private address." example:"https://mcp.example.com/tickets"`
}

// ToolDefinition is an MCP tool of a skill or a template.
type ToolDefinition struct {
	Name        string         `json:"name" doc:"The tool's name." example:"search_tickets"`
	Description string         `json:"description" doc:"What the tool does, for the agent." example:"Searches the support tickets by text."`
	InputSchema map[string]any `json:"inputSchema" doc:"The tool's input, a JSON Schema of type object."`
	ServerURI   string         `json:"serverUri" doc:"The absolute URI of the MCP server serving the tool." example:"https://mcp.example.com/tickets"`
}

// toolDefinitionOf turns a request into the command's shape, refusing a
// server URL the agents may not be sent to (checkMCPServerURL); field
// names the definition in the request. The domain checks the schema, so
// it is passed on as it came.
func (s *Server) toolDefinitionOf(field string, t ToolDefinitionRequest) (command.ToolDefinition, error) {
	if reason := checkMCPServerURL(t.ServerURI, s.cfg.MCPAllowPrivate); reason != "" {
		f := joinField(field, "serverUri")
		return command.ToolDefinition{}, NewKindError(KindValidation, f+" "+reason).WithField(f)
	}
	schema, err := json.Marshal(t.InputSchema)
	if err != nil {
		return command.ToolDefinition{}, fmt.Errorf("api: encode input schema: %w", err)
	}
	return command.ToolDefinition{Name: t.Name, Description: t.Description, InputSchema: schema, ServerURI: t.ServerURI}, nil
}

// toolDefinitionsOf is toolDefinitionOf for the list field names.
func (s *Server) toolDefinitionsOf(field string, ts []ToolDefinitionRequest) ([]command.ToolDefinition, error) {
	out := make([]command.ToolDefinition, 0, len(ts))
	for i, t := range ts {
		d, err := s.toolDefinitionOf(fmt.Sprintf("%s[%d]", field, i), t)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func joinField(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// toolsOf answers stored tools; their schemas were checked when added,
// so one that no longer parses is shown empty rather than failing the read.
func toolsOf(ts []domain.MCPToolDefinition) []ToolDefinition {
	out := make([]ToolDefinition, 0, len(ts))
	for _, t := range ts {
		schema := map[string]any{}
		_ = json.Unmarshal([]byte(t.InputSchema), &schema)
		out = append(out, ToolDefinition{Name: t.Name, Description: t.Description, InputSchema: schema, ServerURI: t.ServerURI})
	}
	return out
}

// isActiveFilter reads the isActive query parameter of a list: "" keeps
// everything.
func isActiveFilter(raw string) *bool {
	if raw == "" {
		return nil
	}
	v, _ := strconv.ParseBool(raw) // Huma allows only true and false
	return &v
}

// SkillSummary is one skill of a list (AgentSkillSummaryDto).
type SkillSummary struct {
	ID              uuid.UUID `json:"id" format:"uuid" doc:"The skill's id." example:"5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b"`
	Name            string    `json:"name" doc:"The skill's name." example:"HTTP retries"`
	Description     string    `json:"description" doc:"What the skill is for." example:"How we retry HTTP calls."`
	Version         int       `json:"version" doc:"The instructions' version: 1, then one more per consolidation." example:"2"`
	IsActive        bool      `json:"isActive" doc:"Whether sessions may enable the skill." example:"true"`
	ToolCount       int       `json:"toolCount" doc:"How many MCP tools it provides." example:"1"`
	SubAgentCount   int       `json:"subAgentCount" doc:"How many subagents it provides." example:"0"`
	ActivePillCount int       `json:"activePillCount" doc:"How many memory pills wait for consolidation." example:"3"`
	CreatedAt       time.Time `json:"createdAt" doc:"When the skill was created." example:"2026-03-01T09:00:00Z"`
	UpdatedAt       time.Time `json:"updatedAt" doc:"When it last changed." example:"2026-03-02T09:00:00Z"`
}

// SkillList is one page of skills.
type SkillList struct {
	Items    []SkillSummary `json:"items" nullable:"false" doc:"The page's skills, by name."`
	Total    int            `json:"total" doc:"How many skills match, on all pages." example:"4"`
	Page     int            `json:"page" doc:"The page served, from 1." example:"1"`
	PageSize int            `json:"pageSize" doc:"The page size served." example:"20"`
}

// SkillDetail is a skill with its definitions and memory pills
// (AgentSkillDto).
type SkillDetail struct {
	ID                  uuid.UUID        `json:"id" format:"uuid" doc:"The skill's id." example:"5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b"`
	OwnerID             uuid.UUID        `json:"ownerId" format:"uuid" doc:"The skill's owner." example:"6a1f0c7e-2b3d-4e5f-8a9b-0c1d2e3f4a5b"`
	Name                string           `json:"name" doc:"The skill's name." example:"HTTP retries"`
	Description         string           `json:"description" doc:"What the skill is for." example:"How we retry HTTP calls."`
	Instructions        string           `json:"instructions" doc:"The knowledge injected into the system prompt." example:"Retry idempotent requests only."`
	Version             int              `json:"version" doc:"The instructions' version: 1, then one more per consolidation." example:"2"`
	ToolDefinitions     []ToolDefinition `json:"toolDefinitions" nullable:"false" doc:"The MCP tools the skill provides."`
	SubAgentDefinitions []SubAgent       `json:"subAgentDefinitions" nullable:"false" doc:"The subagents the skill provides."`
	MemoryPills         []MemoryPill     `json:"memoryPills" nullable:"false" doc:"The learnings agents recorded on the skill, in recording order."`
	IsActive            bool             `json:"isActive" doc:"Whether sessions may enable the skill." example:"true"`
	CreatedAt           time.Time        `json:"createdAt" doc:"When the skill was created." example:"2026-03-01T09:00:00Z"`
	UpdatedAt           time.Time        `json:"updatedAt" doc:"When it last changed." example:"2026-03-02T09:00:00Z"`
}

// SubAgent is a subagent a skill provides.
type SubAgent struct {
	Name            string           `json:"name" doc:"The subagent's name." example:"test-runner"`
	Description     string           `json:"description" doc:"What the subagent does." example:"Runs the test suite and reports failures."`
	ModelID         string           `json:"modelId" doc:"The model the subagent runs on." example:"claude-haiku-4-5"`
	Instructions    string           `json:"instructions" doc:"The subagent's own system prompt addition." example:"Run go test ./... and summarise the failures."`
	ToolDefinitions []ToolDefinition `json:"toolDefinitions" nullable:"false" doc:"The MCP tools of the subagent."`
}

// MemoryPill is a learning an agent recorded on a skill (MemoryPillDto).
type MemoryPill struct {
	ID             uuid.UUID  `json:"id" format:"uuid" doc:"The pill's id." example:"8c9d0e1f-2a3b-4c4d-8e5f-6a7b8c9d0e1f"`
	SkillID        uuid.UUID  `json:"skillId" format:"uuid" doc:"The skill it belongs to." example:"5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b"`
	SessionID      uuid.UUID  `json:"sessionId" format:"uuid" doc:"The session whose agent recorded it." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	Content        string     `json:"content" doc:"The learning." example:"The payments API rate limits at 10 requests per second."`
	Category       string     `json:"category" enum:"Mistake,Tip,Guideline,Pattern,Convention" doc:"What kind of learning it is." example:"Tip"`
	Status         string     `json:"status" enum:"Active,Consolidated,Dismissed" doc:"Active until it is folded into the instructions (Consolidated) or Dismissed." example:"Active"`
	CreatedAt      time.Time  `json:"createdAt" doc:"When it was recorded." example:"2026-03-01T09:30:00Z"`
	ConsolidatedAt *time.Time `json:"consolidatedAt,omitempty" doc:"When it was folded into the instructions." example:"2026-03-03T09:00:00Z"`
	DismissedAt    *time.Time `json:"dismissedAt,omitempty" doc:"When it was dismissed." example:"2026-03-03T09:00:00Z"`
}

// MemoryPillList is one page of a skill's memory pills.
type MemoryPillList struct {
	Items    []MemoryPill `json:"items" nullable:"false" doc:"The page's pills, newest first."`
	Total    int          `json:"total" doc:"How many pills match, on all pages." example:"3"`
	Page     int          `json:"page" doc:"The page served, from 1." example:"1"`
	PageSize int          `json:"pageSize" doc:"The page size served." example:"20"`
}

// TemplateSummary is one template of a list (AgentTemplateSummaryDto).
type TemplateSummary struct {
	ID                   uuid.UUID `json:"id" format:"uuid" doc:"The template's id." example:"3c9d2e1f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"`
	Name                 string    `json:"name" doc:"The template's name." example:"Backend feature"`
	Description          string    `json:"description,omitempty" doc:"What the template is for." example:"Go backend work with tests and lint."`
	ModelID              string    `json:"modelId" doc:"The model of its sessions." example:"claude-sonnet-4-5"`
	IsActive             bool      `json:"isActive" doc:"Whether it may create sessions." example:"true"`
	PlanApprovalRequired bool      `json:"planApprovalRequired" doc:"Whether plans wait for your approval." example:"true"`
	DefaultBudgetCapUsd  float64   `json:"defaultBudgetCapUsd" doc:"The spending cap of each session, in US dollars." example:"10"`
	AllowedToolCount     int       `json:"allowedToolCount" doc:"How many tools the agent may use." example:"3"`
	CustomToolCount      int       `json:"customToolCount" doc:"How many MCP tools it adds." example:"1"`
	DefaultSkillCount    int       `json:"defaultSkillCount" doc:"How many skills its sessions get." example:"2"`
	RuleCount            int       `json:"ruleCount" doc:"How many classification rules it has." example:"0"`
	Scheduled            bool      `json:"scheduled" doc:"Whether it is an automation with an enabled schedule." example:"false"`
	CreatedAt            time.Time `json:"createdAt" doc:"When it was created." example:"2026-03-01T09:00:00Z"`
	UpdatedAt            time.Time `json:"updatedAt" doc:"When it last changed." example:"2026-03-02T09:00:00Z"`
}

// TemplateList is one page of templates.
type TemplateList struct {
	Items    []TemplateSummary `json:"items" nullable:"false" doc:"The page's templates, by name."`
	Total    int               `json:"total" doc:"How many templates match, on all pages." example:"5"`
	Page     int               `json:"page" doc:"The page served, from 1." example:"1"`
	PageSize int               `json:"pageSize" doc:"The page size served." example:"20"`
}

// TemplateDetail is a template's full configuration (AgentTemplateDto).
type TemplateDetail struct {
	ID                    uuid.UUID        `json:"id" format:"uuid" doc:"The template's id." example:"3c9d2e1f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"`
	OwnerID               uuid.UUID        `json:"ownerId" format:"uuid" doc:"The template's owner." example:"6a1f0c7e-2b3d-4e5f-8a9b-0c1d2e3f4a5b"`
	Name                  string           `json:"name" doc:"The template's name." example:"Backend feature"`
	Description           string           `json:"description,omitempty" doc:"What the template is for." example:"Go backend work with tests and lint."`
	ModelID               string           `json:"modelId" doc:"The model of its sessions." example:"claude-sonnet-4-5"`
	SystemPrompt          string           `json:"systemPrompt,omitempty" doc:"Base instructions of every session, before the skills'." example:"Run make check before finishing."`
	AllowedTools          []string         `json:"allowedTools" nullable:"false" doc:"The tools the agent may use." example:"[\"Read\",\"Edit\",\"Bash\"]"`
	CustomToolDefinitions []ToolDefinition `json:"customToolDefinitions" nullable:"false" doc:"The MCP tools its sessions get."`
	DefaultSkillIDs       []uuid.UUID      `json:"defaultSkillIds" nullable:"false" format:"uuid" doc:"The skills enabled on its sessions, in order."`
	DefaultAutoContinue   *AutoContinue    `json:"defaultAutoContinue,omitempty" doc:"Its sessions' validate-and-continue loop, if any."`
	PlanApprovalRequired  bool             `json:"planApprovalRequired" doc:"Whether plans wait for your approval." example:"true"`
	ClassificationRules   []Rule           `json:"classificationRules" nullable:"false" doc:"Its classification rules."`
	Schedule              *Schedule        `json:"schedule,omitempty" doc:"When it runs, for a scheduled automation."`
	NextRunAt             *time.Time       `json:"nextRunAt" nullable:"true" doc:"When the schedule next starts a session; null without an enabled schedule or while the template is deactivated." example:"2026-03-02T08:00:00Z"`
	DefaultBudgetCapUsd   float64          `json:"defaultBudgetCapUsd" doc:"The spending cap of each session, in US dollars." example:"10"`
	WarnAtPercent         int              `json:"warnAtPercent" doc:"The share of the cap at which you are warned." example:"80"`
	ToolApproval          ToolApproval     `json:"toolApproval" doc:"Which tool uses of its sessions wait for your approval."`
	Timeouts              Timeouts         `json:"timeouts" doc:"How long its sessions wait for you."`
	SandboxLimits         SandboxLimits    `json:"sandboxLimits" doc:"Limits of its sessions' sandboxes; a zero field is the deployment's."`
	IsActive              bool             `json:"isActive" doc:"Whether it may create sessions." example:"true"`
	CreatedAt             time.Time        `json:"createdAt" doc:"When it was created." example:"2026-03-01T09:00:00Z"`
	UpdatedAt             time.Time        `json:"updatedAt" doc:"When it last changed." example:"2026-03-02T09:00:00Z"`
	Version               int64            `json:"version" doc:"The template's version; it grows with every change." example:"4"`
}

// Rule is a classification rule of a template.
type Rule struct {
	ID           uuid.UUID `json:"id" format:"uuid" doc:"The rule's id." example:"9a0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d"`
	MatchField   string    `json:"matchField" doc:"The field the rule looks at." example:"subject"`
	MatchPattern string    `json:"matchPattern" doc:"The pattern the field must match." example:"(?i)invoice"`
	ClassifyAs   string    `json:"classifyAs" doc:"The class a matching item gets." example:"billing"`
	MinPriority  string    `json:"minPriority,omitempty" doc:"The lowest priority the rule applies to." example:"High"`
}

// Schedule is when a scheduled automation runs.
type Schedule struct {
	CronExpression string `json:"cronExpression" doc:"A five-field cron expression." example:"0 8 * * 1-5"`
	TimeZone       string `json:"timeZone" doc:"The IANA time zone the expression is read in." example:"Europe/Lisbon"`
	IsEnabled      bool   `json:"isEnabled" doc:"Whether the schedule runs." example:"true"`
}

// Timeouts is how long sessions wait for their owner.
type Timeouts struct {
	InputSeconds  int64  `json:"inputSeconds" doc:"How long a question waits for an answer." example:"86400"`
	DefaultAnswer string `json:"defaultAnswer,omitempty" doc:"The answer given to a question nobody answered in time." example:"Use your best judgement."`
	PauseSeconds  int64  `json:"pauseSeconds" doc:"How long a session may stay Paused before it fails." example:"600"`
}

func skillDetailOf(s domain.AgentSkillSnapshot) SkillDetail {
	return SkillDetail{ID: s.ID, OwnerID: s.OwnerID, Name: s.Name, Description: s.Description, Instructions: s.Instructions,
		Version: s.SkillVersion, ToolDefinitions: toolsOf(s.ToolDefinitions), SubAgentDefinitions: subAgentsOf(s.SubAgentDefinitions),
		MemoryPills: pillsOf(s.MemoryPills), IsActive: s.IsActive, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
}

func subAgentsOf(ds []domain.SkillSubAgentDefinition) []SubAgent {
	out := make([]SubAgent, 0, len(ds))
	for _, sa := range ds {
		out = append(out, SubAgent{Name: sa.Name, Description: sa.Description,
			ModelID: sa.ModelID, Instructions: sa.Instructions, ToolDefinitions: toolsOf(sa.ToolDefinitions)})
	}
	return out
}

func pillsOf(ps []domain.MemoryPill) []MemoryPill {
	out := make([]MemoryPill, 0, len(ps))
	for _, p := range ps {
		out = append(out, MemoryPill{ID: p.ID, SkillID: p.SkillID, SessionID: p.SessionID, Content: p.Content,
			Category: string(p.Category), Status: string(p.Status), CreatedAt: p.CreatedAt,
			ConsolidatedAt: p.ConsolidatedAt, DismissedAt: p.DismissedAt})
	}
	return out
}

// templateDetailOf returns the template as the API shows it at now.
func templateDetailOf(t domain.AgentTemplateSnapshot, now time.Time) TemplateDetail {
	d := TemplateDetail{ID: t.ID, OwnerID: t.OwnerID, Name: t.Name, Description: t.Description, ModelID: t.ModelID,
		SystemPrompt: t.SystemPrompt, AllowedTools: t.AllowedTools, CustomToolDefinitions: toolsOf(t.CustomToolDefinitions),
		DefaultSkillIDs: t.DefaultSkillIDs, PlanApprovalRequired: t.PlanApprovalRequired,
		ClassificationRules: make([]Rule, 0, len(t.ClassificationRules)), DefaultBudgetCapUsd: usd(t.DefaultBudget.HardCapUsd),
		WarnAtPercent: t.DefaultBudget.WarnAtPercent, ToolApproval: toolApprovalOf(t.ToolApproval),
		Timeouts: Timeouts{InputSeconds: int64(t.Timeouts.Input / time.Second), DefaultAnswer: t.Timeouts.DefaultAnswer,
			PauseSeconds: int64(t.Timeouts.Pause / time.Second)},
		SandboxLimits: SandboxLimits{MaxProcesses: t.SandboxLimits.MaxProcesses, MaxMemoryMiB: t.SandboxLimits.MaxMemoryMiB},
		IsActive:      t.IsActive, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, Version: t.Version}
	if d.AllowedTools == nil {
		d.AllowedTools = []string{}
	}
	if d.DefaultSkillIDs == nil {
		d.DefaultSkillIDs = []uuid.UUID{}
	}
	if a := t.DefaultAutoContinue; a != nil {
		ac := &AutoContinue{MaxContinuations: a.MaxContinuations, CurrentContinuationCount: a.CurrentContinuationCount,
			IsEnabled: a.IsEnabled, ValidationCriteria: []ValidationCriterion{}}
		for _, c := range a.ValidationCriteria {
			ac.ValidationCriteria = append(ac.ValidationCriteria, ValidationCriterion{Type: string(c.Type), Threshold: c.Threshold, CustomCommand: c.CustomCommand})
		}
		d.DefaultAutoContinue = ac
	}
	for _, r := range t.ClassificationRules {
		d.ClassificationRules = append(d.ClassificationRules, Rule{ID: r.ID, MatchField: r.MatchField,
			MatchPattern: r.MatchPattern, ClassifyAs: r.ClassifyAs, MinPriority: r.MinPriority})
	}
	if s := t.Schedule; s != nil {
		d.Schedule = &Schedule{CronExpression: s.CronExpression, TimeZone: s.TimeZone, IsEnabled: s.IsEnabled}
		d.NextRunAt = nextRunAt(t, now)
	}
	return d
}

// nextRunAt is the first due time of the template's schedule after now,
// read as the scheduler reads it; nil when the schedule starts nothing.
func nextRunAt(t domain.AgentTemplateSnapshot, now time.Time) *time.Time {
	if t.Schedule == nil || !t.Schedule.IsEnabled || !t.IsActive {
		return nil
	}
	sched, err := schedule.Parse(*t.Schedule)
	if err != nil {
		return nil
	}
	next, ok := sched.Next(now)
	if !ok {
		return nil
	}
	return &next
}
