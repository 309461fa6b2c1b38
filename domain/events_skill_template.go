package domain

import (
	"github.com/google/uuid"
)

// AgentSkillCreatedEvent records that a skill was created.
type AgentSkillCreatedEvent struct {
	SkillMeta
	Name string `json:"name"`
}

// AgentSkillUpdatedEvent records that a skill's details, tools or subagents changed.
type AgentSkillUpdatedEvent struct{ SkillMeta }

// AgentSkillInstructionsUpdatedEvent records that a skill's instructions changed.
type AgentSkillInstructionsUpdatedEvent struct {
	SkillMeta
	NewVersion int `json:"newVersion"`
}

// AgentSkillDeactivatedEvent records that the skill can no longer be enabled.
type AgentSkillDeactivatedEvent struct{ SkillMeta }

// AgentSkillActivatedEvent records that the skill can be enabled again.
type AgentSkillActivatedEvent struct{ SkillMeta }

// MemoryPillRecordedEvent records that an agent recorded a learning on the skill.
type MemoryPillRecordedEvent struct {
	SkillMeta
	PillID    uuid.UUID          `json:"pillId"`
	SessionID uuid.UUID          `json:"sessionId"`
	Category  MemoryPillCategory `json:"category"`
}

// SkillConsolidatedEvent records that pills were folded into the instructions.
type SkillConsolidatedEvent struct {
	SkillMeta
	NewVersion            int `json:"newVersion"`
	ConsolidatedPillCount int `json:"consolidatedPillCount"`
}

// MemoryPillDismissedEvent records that the owner discarded a pill.
type MemoryPillDismissedEvent struct {
	SkillMeta
	PillID uuid.UUID `json:"pillId"`
}

// AgentTemplateCreatedEvent records that a template was created.
type AgentTemplateCreatedEvent struct {
	TemplateMeta
	Name string `json:"name"`
}

// AgentTemplateUpdatedEvent records that a template changed.
type AgentTemplateUpdatedEvent struct{ TemplateMeta }

// AgentTemplateDeactivatedEvent records that the template can no longer create sessions.
type AgentTemplateDeactivatedEvent struct{ TemplateMeta }

// AgentTemplateActivatedEvent records that the template can create sessions again.
type AgentTemplateActivatedEvent struct{ TemplateMeta }

// EventType returns "agent_skill_created".
func (AgentSkillCreatedEvent) EventType() string { return "agent_skill_created" }

// EventType returns "agent_skill_updated".
func (AgentSkillUpdatedEvent) EventType() string { return "agent_skill_updated" }

// EventType returns "agent_skill_instructions_updated".
func (AgentSkillInstructionsUpdatedEvent) EventType() string {
	return "agent_skill_instructions_updated"
}

// EventType returns "agent_skill_deactivated".
func (AgentSkillDeactivatedEvent) EventType() string { return "agent_skill_deactivated" }

// EventType returns "agent_skill_activated".
func (AgentSkillActivatedEvent) EventType() string { return "agent_skill_activated" }

// EventType returns "memory_pill_recorded".
func (MemoryPillRecordedEvent) EventType() string { return "memory_pill_recorded" }

// EventType returns "skill_consolidated".
func (SkillConsolidatedEvent) EventType() string { return "skill_consolidated" }

// EventType returns "memory_pill_dismissed".
func (MemoryPillDismissedEvent) EventType() string { return "memory_pill_dismissed" }

// EventType returns "agent_template_created".
func (AgentTemplateCreatedEvent) EventType() string { return "agent_template_created" }

// EventType returns "agent_template_updated".
func (AgentTemplateUpdatedEvent) EventType() string { return "agent_template_updated" }

// EventType returns "agent_template_deactivated".
func (AgentTemplateDeactivatedEvent) EventType() string { return "agent_template_deactivated" }

// EventType returns "agent_template_activated".
func (AgentTemplateActivatedEvent) EventType() string { return "agent_template_activated" }
