package domain

import (
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// MaxTemplateNameChars bounds a template name.
const MaxTemplateNameChars = 100

// ClassificationRule is a rule of an automation template (e.g. email
// triage): items whose MatchField matches MatchPattern are classified as
// ClassifyAs.
type ClassificationRule struct {
	ID           uuid.UUID `json:"id"`
	MatchField   string    `json:"matchField"`
	MatchPattern string    `json:"matchPattern"`
	ClassifyAs   string    `json:"classifyAs"`
	MinPriority  string    `json:"minPriority,omitempty"`
}

// Validate checks the id, the field and the pattern are set.
func (r ClassificationRule) Validate() error {
	if err := requireID("classificationRules.id", r.ID); err != nil {
		return err
	}
	if strings.TrimSpace(r.MatchField) == "" {
		return invalid("classificationRules.matchField", "must not be empty")
	}
	if strings.TrimSpace(r.MatchPattern) == "" {
		return invalid("classificationRules.matchPattern", "must not be empty")
	}
	return nil
}

// AgentTemplate is the aggregate root of a reusable session configuration:
// model, base prompt, allowed and custom tools, default skills, budget,
// plan and tool approval, timeouts and, for automations, classification
// rules and a schedule. A deactivated template creates no sessions.
type AgentTemplate struct {
	eventRecorder

	id                   uuid.UUID
	ownerID              uuid.UUID
	name                 string
	description          string
	modelID              string
	systemPrompt         string
	allowedTools         []string
	customTools          []MCPToolDefinition
	defaultSkillIDs      []uuid.UUID
	defaultAutoContinue  *AutoContinueConfig
	planApprovalRequired bool
	rules                []ClassificationRule
	schedule             *AgentSchedule
	// scheduleSince is when the schedule last started to be in force: set,
	// changed, or its template activated. The scheduler starts no due time
	// before it, so a schedule turned back on does not catch up on the
	// runs it had while off.
	scheduleSince time.Time
	defaultBudget SessionBudget
	toolApproval  ToolApprovalPolicy
	timeouts      SessionTimeouts
	sandboxLimits SandboxLimits
	isActive      bool
	createdAt     time.Time
	updatedAt     time.Time
	version       int64
}

// NewTemplateParams are the inputs of NewAgentTemplate.
type NewTemplateParams struct {
	ID, OwnerID          uuid.UUID
	Name                 string
	Description          string
	ModelID              string
	SystemPrompt         string
	AllowedTools         []string
	DefaultBudget        SessionBudget
	CustomTools          []MCPToolDefinition
	DefaultSkillIDs      []uuid.UUID
	DefaultAutoContinue  *AutoContinueConfig
	PlanApprovalRequired bool
	ClassificationRules  []ClassificationRule
	Schedule             *AgentSchedule
	// ToolApproval defaults to DefaultToolApprovalPolicy.
	ToolApproval *ToolApprovalPolicy
	// Timeouts defaults to DefaultSessionTimeouts.
	Timeouts *SessionTimeouts
	// SandboxLimits defaults to the deployment's.
	SandboxLimits *SandboxLimits
	Now           time.Time
}

// NewAgentTemplate validates p and returns an active template.
func NewAgentTemplate(p NewTemplateParams) (*AgentTemplate, error) {
	if err := requireID("id", p.ID); err != nil {
		return nil, err
	}
	if err := requireID("ownerId", p.OwnerID); err != nil {
		return nil, err
	}
	t := &AgentTemplate{id: p.ID, ownerID: p.OwnerID, isActive: true,
		toolApproval: DefaultToolApprovalPolicy(), timeouts: DefaultSessionTimeouts()}
	if p.ToolApproval != nil {
		t.toolApproval = p.ToolApproval.clone()
	}
	if p.Timeouts != nil {
		t.timeouts = *p.Timeouts
	}
	err := t.apply(TemplateUpdate{Name: &p.Name, Description: &p.Description, ModelID: &p.ModelID,
		SystemPrompt: &p.SystemPrompt, AllowedTools: &p.AllowedTools, DefaultBudget: &p.DefaultBudget,
		PlanApprovalRequired: &p.PlanApprovalRequired, DefaultAutoContinue: p.DefaultAutoContinue,
		ToolApproval: &t.toolApproval, Timeouts: &t.timeouts, SandboxLimits: p.SandboxLimits})
	if err != nil {
		return nil, err
	}
	if err := validateToolSet("customToolDefinitions", p.CustomTools); err != nil {
		return nil, err
	}
	skills, err := uniqueIDs("defaultSkillIds", p.DefaultSkillIDs)
	if err != nil {
		return nil, err
	}
	for _, r := range p.ClassificationRules {
		if err := r.Validate(); err != nil {
			return nil, err
		}
	}
	if !uniqueBy(p.ClassificationRules, func(r ClassificationRule) string { return r.ID.String() }) {
		return nil, invalid("classificationRules", "rule ids must be unique")
	}
	if p.Schedule != nil {
		if err := p.Schedule.Validate(); err != nil {
			return nil, err
		}
	}
	now := p.Now.UTC()
	t.customTools, t.defaultSkillIDs = slices.Clone(p.CustomTools), skills
	t.rules, t.schedule = slices.Clone(p.ClassificationRules), clonePtr(p.Schedule)
	t.createdAt, t.updatedAt, t.scheduleSince = now, now, now
	t.raise(AgentTemplateCreatedEvent{TemplateMeta: t.meta(now), Name: t.name})
	return t, nil
}

// TemplateUpdate changes the fields that are set (nil keeps the value).
type TemplateUpdate struct {
	Name                 *string
	Description          *string
	ModelID              *string
	SystemPrompt         *string
	AllowedTools         *[]string
	DefaultBudget        *SessionBudget
	PlanApprovalRequired *bool
	DefaultAutoContinue  *AutoContinueConfig
	ToolApproval         *ToolApprovalPolicy
	Timeouts             *SessionTimeouts
	SandboxLimits        *SandboxLimits
}

// Update applies u, all or nothing.
func (t *AgentTemplate) Update(u TemplateUpdate, now time.Time) error {
	next := *t
	next.eventRecorder = eventRecorder{}
	if err := next.apply(u); err != nil {
		return err
	}
	events := t.events
	*t = next
	t.events = events
	t.touch(now)
	t.raise(AgentTemplateUpdatedEvent{TemplateMeta: t.meta(now)})
	return nil
}

// apply validates and sets the fields of u on t.
func (t *AgentTemplate) apply(u TemplateUpdate) error {
	var err error
	if u.Name != nil {
		if t.name, err = requireText("name", *u.Name, 1, MaxTemplateNameChars); err != nil {
			return err
		}
	}
	if u.Description != nil {
		if t.description, err = optionalText("description", *u.Description, 2000); err != nil {
			return err
		}
	}
	if u.ModelID != nil {
		if t.modelID, err = requireText("modelId", *u.ModelID, 1, 200); err != nil {
			return err
		}
	}
	if u.SystemPrompt != nil {
		t.systemPrompt = *u.SystemPrompt
	}
	return t.applyDefaults(u)
}

// applyDefaults validates and sets the tools, limits and policies of u,
// which the template's sessions start with.
func (t *AgentTemplate) applyDefaults(u TemplateUpdate) error {
	var err error
	if u.AllowedTools != nil {
		if t.allowedTools, err = validateAllowedTools(*u.AllowedTools); err != nil {
			return err
		}
	}
	if u.DefaultBudget != nil {
		b, err := NewSessionBudget(u.DefaultBudget.HardCapUsd, u.DefaultBudget.WarnAtPercent)
		if err != nil {
			return err
		}
		t.defaultBudget = b
	}
	if u.PlanApprovalRequired != nil {
		t.planApprovalRequired = *u.PlanApprovalRequired
	}
	if u.DefaultAutoContinue != nil {
		if err := u.DefaultAutoContinue.Validate(); err != nil {
			return err
		}
		t.defaultAutoContinue = cloneAutoContinue(u.DefaultAutoContinue)
	}
	if u.ToolApproval != nil {
		if err := u.ToolApproval.Validate(); err != nil {
			return err
		}
		t.toolApproval = u.ToolApproval.clone()
	}
	if u.Timeouts != nil {
		if err := u.Timeouts.Validate(); err != nil {
			return err
		}
		t.timeouts = *u.Timeouts
	}
	if u.SandboxLimits != nil {
		if err := u.SandboxLimits.Validate(); err != nil {
			return err
		}
		t.sandboxLimits = *u.SandboxLimits
	}
	return nil
}

// validateAllowedTools requires at least one non-empty, unique tool name.
func validateAllowedTools(tools []string) ([]string, error) {
	if len(tools) == 0 {
		return nil, invalid("allowedTools", "must contain at least one tool")
	}
	seen := map[string]bool{}
	for _, name := range tools {
		if strings.TrimSpace(name) == "" {
			return nil, invalid("allowedTools", "tool names must not be empty")
		}
		if seen[name] {
			return nil, invalid("allowedTools", "tool %q appears twice", name)
		}
		seen[name] = true
	}
	return slices.Clone(tools), nil
}

func (t *AgentTemplate) meta(now time.Time) TemplateMeta {
	return TemplateMeta{TemplateID: t.id, OwnerID: t.ownerID, OccurredAt: now.UTC()}
}

func (t *AgentTemplate) touch(now time.Time) { t.updatedAt = now.UTC() }

func (t *AgentTemplate) status() string {
	if t.isActive {
		return "Active"
	}
	return "Inactive"
}

func (t *AgentTemplate) refuse(op string, reason error) error {
	return &TransitionError{Aggregate: "AgentTemplate", Operation: op, Status: t.status(), Reason: reason}
}
