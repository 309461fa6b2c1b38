package domain

import (
	"github.com/google/uuid"
)

// SessionAllocatedEvent: the pool gave the session a slot (it starts).
type SessionAllocatedEvent struct {
	SessionMeta
	ActiveCount int `json:"activeCount"`
	MaxCount    int `json:"maxCount"`
}

// SessionReleasedEvent: the session gave its pool slot back.
type SessionReleasedEvent struct {
	SessionMeta
	ActiveCount int `json:"activeCount"`
	MaxCount    int `json:"maxCount"`
}

// SessionPoolExhaustedEvent: no slot was free; the session stays Queued.
// SessionID is the session that attempted to start.
type SessionPoolExhaustedEvent struct {
	SessionMeta
	CurrentCount int `json:"currentCount"`
	MaxCount     int `json:"maxCount"`
}

// MessageEnqueuedEvent: a message was added to a session's queue.
type MessageEnqueuedEvent struct {
	QueueMeta
	MessageID uuid.UUID       `json:"messageId"`
	Priority  MessagePriority `json:"priority"`
	Source    MessageSource   `json:"source"`
}

// MessageDeliveredEvent: the sidecar acknowledged a message.
type MessageDeliveredEvent struct {
	QueueMeta
	MessageID uuid.UUID `json:"messageId"`
}

// MessageCancelledEvent: a pending message was cancelled before delivery.
type MessageCancelledEvent struct {
	QueueMeta
	MessageID uuid.UUID `json:"messageId"`
}

// MessagePromotedToImmediateEvent: a queued message became Immediate.
type MessagePromotedToImmediateEvent struct {
	QueueMeta
	MessageID uuid.UUID `json:"messageId"`
}

// SessionChainCreatedEvent: a chain was created around its first session.
type SessionChainCreatedEvent struct {
	ChainMeta
	OriginalObjective string    `json:"originalObjective"`
	FirstSessionID    uuid.UUID `json:"firstSessionId"`
}

// SessionHandoffInitiatedEvent: the current session wrote its handoff;
// start the next session with it.
type SessionHandoffInitiatedEvent struct {
	ChainMeta
	FromSessionID     uuid.UUID `json:"fromSessionId"`
	HandoffDocumentID uuid.UUID `json:"handoffDocumentId"`
}

// SessionAddedToChainEvent: a continuation session joined the chain.
type SessionAddedToChainEvent struct {
	ChainMeta
	NewSessionID uuid.UUID `json:"newSessionId"`
	Position     int       `json:"position"`
}

// SessionChainCompletedEvent: the chain's work is done.
type SessionChainCompletedEvent struct {
	ChainMeta
	TotalSessions int `json:"totalSessions"`
	TotalCostUsd  USD `json:"totalCostUsd"`
}

// SessionChainCancelledEvent: the chain was cancelled; cancel its live sessions.
type SessionChainCancelledEvent struct{ ChainMeta }

// AgentSkillCreatedEvent: a skill was created.
type AgentSkillCreatedEvent struct {
	SkillMeta
	Name string `json:"name"`
}

// AgentSkillUpdatedEvent: a skill's details, tools or subagents changed.
type AgentSkillUpdatedEvent struct{ SkillMeta }

// AgentSkillInstructionsUpdatedEvent: a skill's instructions changed.
type AgentSkillInstructionsUpdatedEvent struct {
	SkillMeta
	NewVersion int `json:"newVersion"`
}

// AgentSkillDeactivatedEvent: the skill can no longer be enabled.
type AgentSkillDeactivatedEvent struct{ SkillMeta }

// AgentSkillActivatedEvent: the skill can be enabled again.
type AgentSkillActivatedEvent struct{ SkillMeta }

// MemoryPillRecordedEvent: an agent recorded a learning on the skill.
type MemoryPillRecordedEvent struct {
	SkillMeta
	PillID    uuid.UUID          `json:"pillId"`
	SessionID uuid.UUID          `json:"sessionId"`
	Category  MemoryPillCategory `json:"category"`
}

// SkillConsolidatedEvent: pills were folded into the instructions.
type SkillConsolidatedEvent struct {
	SkillMeta
	NewVersion            int `json:"newVersion"`
	ConsolidatedPillCount int `json:"consolidatedPillCount"`
}

// MemoryPillDismissedEvent: the owner discarded a pill.
type MemoryPillDismissedEvent struct {
	SkillMeta
	PillID uuid.UUID `json:"pillId"`
}

// AgentTemplateCreatedEvent: a template was created.
type AgentTemplateCreatedEvent struct {
	TemplateMeta
	Name string `json:"name"`
}

// AgentTemplateUpdatedEvent: a template changed.
type AgentTemplateUpdatedEvent struct{ TemplateMeta }

// AgentTemplateDeactivatedEvent: the template can no longer create sessions.
type AgentTemplateDeactivatedEvent struct{ TemplateMeta }

// AgentTemplateActivatedEvent: the template can create sessions again.
type AgentTemplateActivatedEvent struct{ TemplateMeta }

// EventType names.
func (SessionAllocatedEvent) EventType() string           { return "session_allocated" }
func (SessionReleasedEvent) EventType() string            { return "session_released" }
func (SessionPoolExhaustedEvent) EventType() string       { return "session_pool_exhausted" }
func (MessageEnqueuedEvent) EventType() string            { return "message_enqueued" }
func (MessageDeliveredEvent) EventType() string           { return "message_delivered" }
func (MessageCancelledEvent) EventType() string           { return "message_cancelled" }
func (MessagePromotedToImmediateEvent) EventType() string { return "message_promoted_to_immediate" }
func (SessionChainCreatedEvent) EventType() string        { return "session_chain_created" }
func (SessionHandoffInitiatedEvent) EventType() string    { return "session_handoff_initiated" }
func (SessionAddedToChainEvent) EventType() string        { return "session_added_to_chain" }
func (SessionChainCompletedEvent) EventType() string      { return "session_chain_completed" }
func (SessionChainCancelledEvent) EventType() string      { return "session_chain_cancelled" }
func (AgentSkillCreatedEvent) EventType() string          { return "agent_skill_created" }
func (AgentSkillUpdatedEvent) EventType() string          { return "agent_skill_updated" }
func (AgentSkillInstructionsUpdatedEvent) EventType() string {
	return "agent_skill_instructions_updated"
}
func (AgentSkillDeactivatedEvent) EventType() string    { return "agent_skill_deactivated" }
func (AgentSkillActivatedEvent) EventType() string      { return "agent_skill_activated" }
func (MemoryPillRecordedEvent) EventType() string       { return "memory_pill_recorded" }
func (SkillConsolidatedEvent) EventType() string        { return "skill_consolidated" }
func (MemoryPillDismissedEvent) EventType() string      { return "memory_pill_dismissed" }
func (AgentTemplateCreatedEvent) EventType() string     { return "agent_template_created" }
func (AgentTemplateUpdatedEvent) EventType() string     { return "agent_template_updated" }
func (AgentTemplateDeactivatedEvent) EventType() string { return "agent_template_deactivated" }
func (AgentTemplateActivatedEvent) EventType() string   { return "agent_template_activated" }
