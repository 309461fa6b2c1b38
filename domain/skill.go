package domain

import (
	"slices"
	"time"

	"github.com/google/uuid"
)

// Limits of a skill.
const (
	MaxSkillNameChars        = 100
	MaxSkillDescriptionChars = 500
)

// AgentSkill is the aggregate root of a reusable package of instructions,
// MCP tools and subagent definitions that sessions enable, plus the memory
// pills agents record on it. Consolidating pills into the instructions
// increments its SkillVersion.
type AgentSkill struct {
	eventRecorder

	id           uuid.UUID
	ownerID      uuid.UUID
	name         string
	description  string
	instructions string
	skillVersion int
	tools        []MCPToolDefinition
	subAgents    []SkillSubAgentDefinition
	pills        []MemoryPill
	isActive     bool
	createdAt    time.Time
	updatedAt    time.Time
	version      int64
}

// NewAgentSkill validates and returns an active skill at SkillVersion 1.
// Name uniqueness per owner is the repository's to enforce.
func NewAgentSkill(id, ownerID uuid.UUID, name, description, instructions string, tools []MCPToolDefinition, subAgents []SkillSubAgentDefinition, now time.Time) (*AgentSkill, error) {
	if err := requireID("id", id); err != nil {
		return nil, err
	}
	if err := requireID("ownerId", ownerID); err != nil {
		return nil, err
	}
	name, err := requireText("name", name, 1, MaxSkillNameChars)
	if err != nil {
		return nil, err
	}
	if description, err = requireText("description", description, 1, MaxSkillDescriptionChars); err != nil {
		return nil, err
	}
	if err := validateToolSet("toolDefinitions", tools); err != nil {
		return nil, err
	}
	if err := validateSubAgentSet(subAgents); err != nil {
		return nil, err
	}
	t := now.UTC()
	s := &AgentSkill{id: id, ownerID: ownerID, name: name, description: description, instructions: instructions,
		skillVersion: 1, tools: slices.Clone(tools), subAgents: cloneSubAgentDefs(subAgents), isActive: true,
		createdAt: t, updatedAt: t}
	s.raise(AgentSkillCreatedEvent{SkillMeta: s.meta(now), Name: name})
	return s, nil
}

func validateSubAgentSet(defs []SkillSubAgentDefinition) error {
	seen := map[string]bool{}
	for _, d := range defs {
		if err := d.Validate(); err != nil {
			return err
		}
		if seen[d.Name] {
			return invalid("subAgentDefinitions", "subagent name %q appears twice", d.Name)
		}
		seen[d.Name] = true
	}
	return nil
}

func (s *AgentSkill) meta(now time.Time) SkillMeta {
	return SkillMeta{SkillID: s.id, OwnerID: s.ownerID, OccurredAt: now.UTC()}
}

func (s *AgentSkill) status() string {
	if s.isActive {
		return "Active"
	}
	return "Inactive"
}

func (s *AgentSkill) touch(now time.Time) { s.updatedAt = now.UTC() }

// UpdateDetails renames or re-describes the skill; empty arguments keep
// the current value.
func (s *AgentSkill) UpdateDetails(name, description string, now time.Time) error {
	if name != "" {
		n, err := requireText("name", name, 1, MaxSkillNameChars)
		if err != nil {
			return err
		}
		name = n
	}
	if description != "" {
		d, err := requireText("description", description, 1, MaxSkillDescriptionChars)
		if err != nil {
			return err
		}
		description = d
	}
	if name != "" {
		s.name = name
	}
	if description != "" {
		s.description = description
	}
	s.touch(now)
	s.raise(AgentSkillUpdatedEvent{SkillMeta: s.meta(now)})
	return nil
}

// UpdateInstructions replaces the instructions. A manual edit keeps the
// version; consolidation passes incrementVersion to bump it by one.
func (s *AgentSkill) UpdateInstructions(instructions string, incrementVersion bool, now time.Time) error {
	s.instructions = instructions
	if incrementVersion {
		s.skillVersion++
	}
	s.touch(now)
	s.raise(AgentSkillInstructionsUpdatedEvent{SkillMeta: s.meta(now), NewVersion: s.skillVersion})
	return nil
}

// AddToolDefinition adds an MCP tool with a name not yet used by the skill.
func (s *AgentSkill) AddToolDefinition(tool MCPToolDefinition, now time.Time) error {
	if err := tool.Validate(); err != nil {
		return err
	}
	if slices.ContainsFunc(s.tools, func(t MCPToolDefinition) bool { return t.Name == tool.Name }) {
		return &TransitionError{Aggregate: "AgentSkill", Operation: "AddToolDefinition", Status: s.status(), Reason: ErrDuplicate}
	}
	s.tools = append(s.tools, tool)
	s.touch(now)
	s.raise(AgentSkillUpdatedEvent{SkillMeta: s.meta(now)})
	return nil
}

// RemoveToolDefinition removes the tool named name.
func (s *AgentSkill) RemoveToolDefinition(name string, now time.Time) error {
	i := slices.IndexFunc(s.tools, func(t MCPToolDefinition) bool { return t.Name == name })
	if i < 0 {
		return &NotFoundError{Entity: "MCPToolDefinition", ID: name}
	}
	s.tools = slices.Delete(s.tools, i, i+1)
	s.touch(now)
	s.raise(AgentSkillUpdatedEvent{SkillMeta: s.meta(now)})
	return nil
}

// AddSubAgentDefinition adds a subagent with a name not yet used by the skill.
func (s *AgentSkill) AddSubAgentDefinition(def SkillSubAgentDefinition, now time.Time) error {
	if err := def.Validate(); err != nil {
		return err
	}
	if slices.ContainsFunc(s.subAgents, func(d SkillSubAgentDefinition) bool { return d.Name == def.Name }) {
		return &TransitionError{Aggregate: "AgentSkill", Operation: "AddSubAgentDefinition", Status: s.status(), Reason: ErrDuplicate}
	}
	s.subAgents = append(s.subAgents, cloneSubAgentDefs([]SkillSubAgentDefinition{def})...)
	s.touch(now)
	s.raise(AgentSkillUpdatedEvent{SkillMeta: s.meta(now)})
	return nil
}

// RemoveSubAgentDefinition removes the subagent named name.
func (s *AgentSkill) RemoveSubAgentDefinition(name string, now time.Time) error {
	i := slices.IndexFunc(s.subAgents, func(d SkillSubAgentDefinition) bool { return d.Name == name })
	if i < 0 {
		return &NotFoundError{Entity: "SkillSubAgentDefinition", ID: name}
	}
	s.subAgents = slices.Delete(s.subAgents, i, i+1)
	s.touch(now)
	s.raise(AgentSkillUpdatedEvent{SkillMeta: s.meta(now)})
	return nil
}

// Deactivate stops the skill from being enabled on sessions.
func (s *AgentSkill) Deactivate(now time.Time) error {
	if !s.isActive {
		return &TransitionError{Aggregate: "AgentSkill", Operation: "Deactivate", Status: s.status(), Reason: ErrInvalidTransition}
	}
	s.isActive = false
	s.touch(now)
	s.raise(AgentSkillDeactivatedEvent{SkillMeta: s.meta(now)})
	return nil
}

// Activate lets sessions enable the skill again.
func (s *AgentSkill) Activate(now time.Time) error {
	if s.isActive {
		return &TransitionError{Aggregate: "AgentSkill", Operation: "Activate", Status: s.status(), Reason: ErrInvalidTransition}
	}
	s.isActive = true
	s.touch(now)
	s.raise(AgentSkillActivatedEvent{SkillMeta: s.meta(now)})
	return nil
}
