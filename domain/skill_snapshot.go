package domain

import (
	"slices"
	"time"

	"github.com/google/uuid"
)

// ID returns the skill id.
func (s *AgentSkill) ID() uuid.UUID { return s.id }

// OwnerID returns the skill's owner.
func (s *AgentSkill) OwnerID() uuid.UUID { return s.ownerID }

// Name returns the skill's name.
func (s *AgentSkill) Name() string { return s.name }

// Description returns the skill's description.
func (s *AgentSkill) Description() string { return s.description }

// Instructions returns the text injected into the system prompt.
func (s *AgentSkill) Instructions() string { return s.instructions }

// SkillVersion returns the instructions' version (starts at 1, +1 per
// consolidation). Not to be confused with Version, the storage version.
func (s *AgentSkill) SkillVersion() int { return s.skillVersion }

// ToolDefinitions returns the skill's MCP tools.
func (s *AgentSkill) ToolDefinitions() []MCPToolDefinition { return slices.Clone(s.tools) }

// SubAgentDefinitions returns the skill's subagents.
func (s *AgentSkill) SubAgentDefinitions() []SkillSubAgentDefinition {
	return cloneSubAgentDefs(s.subAgents)
}

// IsActive reports whether sessions may enable the skill.
func (s *AgentSkill) IsActive() bool { return s.isActive }

// CreatedAt returns when the skill was created.
func (s *AgentSkill) CreatedAt() time.Time { return s.createdAt }

// UpdatedAt returns when the skill last changed.
func (s *AgentSkill) UpdatedAt() time.Time { return s.updatedAt }

// Version returns the storage version, for the optimistic lock.
func (s *AgentSkill) Version() int64 { return s.version }

// AgentSkillSnapshot is the stored state of a skill.
type AgentSkillSnapshot struct {
	ID                  uuid.UUID                 `json:"id"`
	OwnerID             uuid.UUID                 `json:"ownerId"`
	Name                string                    `json:"name"`
	Description         string                    `json:"description"`
	Instructions        string                    `json:"instructions"`
	SkillVersion        int                       `json:"skillVersion"`
	ToolDefinitions     []MCPToolDefinition       `json:"toolDefinitions"`
	SubAgentDefinitions []SkillSubAgentDefinition `json:"subAgentDefinitions"`
	MemoryPills         []MemoryPill              `json:"memoryPills"`
	IsActive            bool                      `json:"isActive"`
	CreatedAt           time.Time                 `json:"createdAt"`
	UpdatedAt           time.Time                 `json:"updatedAt"`
	Version             int64                     `json:"version"`
}

// Snapshot returns the skill as plain values.
func (s *AgentSkill) Snapshot() AgentSkillSnapshot {
	return AgentSkillSnapshot{ID: s.id, OwnerID: s.ownerID, Name: s.name, Description: s.description,
		Instructions: s.instructions, SkillVersion: s.skillVersion, ToolDefinitions: s.ToolDefinitions(),
		SubAgentDefinitions: s.SubAgentDefinitions(), MemoryPills: s.MemoryPills(), IsActive: s.isActive,
		CreatedAt: s.createdAt, UpdatedAt: s.updatedAt, Version: s.version}
}

// UnmarshalAgentSkillFromDatabase rebuilds a stored skill, checking the
// invariants the model guarantees (unique tool, subagent and pill ids).
// Definitions are not re-validated against today's rules, so tightening a
// rule never makes stored skills unreadable.
func UnmarshalAgentSkillFromDatabase(snap AgentSkillSnapshot) (*AgentSkill, error) {
	if err := requireID("id", snap.ID); err != nil {
		return nil, err
	}
	if err := requireID("ownerId", snap.OwnerID); err != nil {
		return nil, err
	}
	if snap.Name == "" || snap.SkillVersion < 1 {
		return nil, invalid("skill", "name must be set and skillVersion at least 1")
	}
	if !uniqueBy(snap.ToolDefinitions, func(t MCPToolDefinition) string { return t.Name }) ||
		!uniqueBy(snap.SubAgentDefinitions, func(d SkillSubAgentDefinition) string { return d.Name }) ||
		!uniqueBy(snap.MemoryPills, func(p MemoryPill) string { return p.ID.String() }) {
		return nil, invalid("skill", "tool names, subagent names and pill ids must be unique")
	}
	s := &AgentSkill{id: snap.ID, ownerID: snap.OwnerID, name: snap.Name, description: snap.Description,
		instructions: snap.Instructions, skillVersion: snap.SkillVersion, tools: slices.Clone(snap.ToolDefinitions),
		subAgents: cloneSubAgentDefs(snap.SubAgentDefinitions), isActive: snap.IsActive,
		createdAt: snap.CreatedAt, updatedAt: snap.UpdatedAt, version: snap.Version}
	for _, p := range snap.MemoryPills {
		if err := p.validate(); err != nil {
			return nil, err
		}
		s.pills = append(s.pills, p.clone())
	}
	return s, nil
}

// uniqueBy reports whether key is unique across items.
func uniqueBy[T any](items []T, key func(T) string) bool {
	seen := make(map[string]bool, len(items))
	for _, it := range items {
		k := key(it)
		if seen[k] {
			return false
		}
		seen[k] = true
	}
	return true
}
