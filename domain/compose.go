package domain

import (
	"slices"
	"strings"

	"github.com/google/uuid"
)

// EffectiveConfig is the configuration a sidecar runs a session with,
// composed from the template and the enabled skills. It is immutable for
// one sidecar launch; a reload composes a new one.
type EffectiveConfig struct {
	ModelID string `json:"modelId"`
	// SystemPrompt is the template's prompt, then each skill's
	// instructions in EnabledSkillIDs order.
	SystemPrompt string `json:"systemPrompt"`
	// AllowedTools is the template's allowed tools plus every MCP tool's name.
	AllowedTools []string `json:"allowedTools"`
	// MCPTools are the template's custom tools, then each skill's; on a
	// name clash the first wins.
	MCPTools []MCPToolDefinition `json:"mcpTools"`
	// SubAgents are each skill's subagents; on a name clash the first wins.
	SubAgents            []SkillSubAgentDefinition `json:"subAgents"`
	PlanApprovalRequired bool                      `json:"planApprovalRequired"`
	ToolApproval         ToolApprovalPolicy        `json:"toolApproval"`
}

// promptSeparator separates the parts of a composed system prompt.
const promptSeparator = "\n\n"

// ComposeConfig composes the configuration of a session from its template
// (nil for an ad-hoc session) and its enabled skills, in the session's
// order. First-wins on name clashes makes the order a deliberate choice.
func (s *AgentSession) ComposeConfig(template *AgentTemplate, skills []*AgentSkill) (EffectiveConfig, error) {
	byID := make(map[uuid.UUID]*AgentSkill, len(skills))
	for _, sk := range skills {
		if sk != nil {
			byID[sk.ID()] = sk
		}
	}
	ordered := make([]*AgentSkill, 0, len(s.enabledSkillIDs))
	for _, id := range s.enabledSkillIDs {
		sk, ok := byID[id]
		if !ok {
			return EffectiveConfig{}, &NotFoundError{Entity: "AgentSkill", ID: id.String()}
		}
		ordered = append(ordered, sk)
	}
	if err := sameOwner(s.ownerID, template, ordered); err != nil {
		return EffectiveConfig{}, err
	}
	cfg := compose(template, ordered)
	cfg.ModelID = s.modelID
	cfg.ToolApproval = s.toolApproval.clone()
	return cfg, nil
}

// compose merges template and skills (already ordered).
func compose(template *AgentTemplate, skills []*AgentSkill) EffectiveConfig {
	var cfg EffectiveConfig
	var prompt []string
	toolSeen, subSeen := map[string]bool{}, map[string]bool{}
	addTools := func(tools []MCPToolDefinition) {
		for _, t := range tools {
			if !toolSeen[t.Name] {
				toolSeen[t.Name] = true
				cfg.MCPTools = append(cfg.MCPTools, t)
			}
		}
	}
	if template != nil {
		if p := strings.TrimSpace(template.SystemPrompt()); p != "" {
			prompt = append(prompt, p)
		}
		cfg.AllowedTools = template.AllowedTools()
		cfg.PlanApprovalRequired = template.PlanApprovalRequired()
		addTools(template.CustomToolDefinitions())
	}
	for _, sk := range skills {
		if p := strings.TrimSpace(sk.Instructions()); p != "" {
			prompt = append(prompt, p)
		}
		addTools(sk.ToolDefinitions())
		for _, d := range sk.SubAgentDefinitions() {
			if !subSeen[d.Name] {
				subSeen[d.Name] = true
				cfg.SubAgents = append(cfg.SubAgents, d)
			}
		}
	}
	for _, t := range cfg.MCPTools {
		if !slices.Contains(cfg.AllowedTools, t.Name) {
			cfg.AllowedTools = append(cfg.AllowedTools, t.Name)
		}
	}
	cfg.SystemPrompt = strings.Join(prompt, promptSeparator)
	return cfg
}

// sameOwner refuses a template or skill of another owner as not found:
// to its owner's caller, another user's object does not exist.
func sameOwner(owner uuid.UUID, template *AgentTemplate, skills []*AgentSkill) error {
	if template != nil && template.OwnerID() != owner {
		return &NotFoundError{Entity: "AgentTemplate", ID: template.ID().String()}
	}
	for _, sk := range skills {
		if sk.OwnerID() != owner {
			return &NotFoundError{Entity: "AgentSkill", ID: sk.ID().String()}
		}
	}
	return nil
}

// NewSessionFromTemplate creates a Queued session configured by an active
// template: the template's default skills come first, then the requested
// ones; every enabled skill must be active and given in skills. Fields of
// p that are unset take the template's defaults (model, budget,
// auto-continue, tool approval, timeouts).
func NewSessionFromTemplate(p NewSessionParams, template *AgentTemplate, skills []*AgentSkill) (*AgentSession, error) {
	if template == nil {
		return nil, invalid("templateId", "must be set")
	}
	if template.OwnerID() != p.OwnerID {
		return nil, &NotFoundError{Entity: "AgentTemplate", ID: template.ID().String()}
	}
	if !template.IsActive() {
		return nil, template.refuse("CreateSession", ErrTemplateInactive)
	}
	enabled := template.DefaultSkillIDs()
	for _, id := range p.EnabledSkillIDs {
		if !slices.Contains(enabled, id) {
			enabled = append(enabled, id)
		}
	}
	for _, id := range enabled {
		i := slices.IndexFunc(skills, func(sk *AgentSkill) bool { return sk != nil && sk.ID() == id })
		if i < 0 || skills[i].OwnerID() != p.OwnerID {
			return nil, &NotFoundError{Entity: "AgentSkill", ID: id.String()}
		}
		if !skills[i].IsActive() {
			return nil, &TransitionError{Aggregate: "AgentSkill", Operation: "EnableSkill", Status: skills[i].status(), Reason: ErrSkillInactive}
		}
	}
	id := template.ID()
	p.TemplateID, p.EnabledSkillIDs = &id, enabled
	if strings.TrimSpace(p.ModelID) == "" {
		p.ModelID = template.ModelID()
	}
	if p.Budget.HardCapUsd == 0 {
		p.Budget = template.DefaultBudget()
	}
	if p.AutoContinue == nil {
		p.AutoContinue = template.DefaultAutoContinue()
	}
	if p.ToolApproval == nil {
		policy := template.ToolApproval()
		p.ToolApproval = &policy
	}
	if p.Timeouts == nil {
		t := template.Timeouts()
		p.Timeouts = &t
	}
	return NewAgentSession(p)
}
