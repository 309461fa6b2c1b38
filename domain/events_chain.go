package domain

import (
	"github.com/google/uuid"
)

// SessionChainCreatedEvent records that a chain was created around its first session.
type SessionChainCreatedEvent struct {
	ChainMeta
	OriginalObjective string    `json:"originalObjective"`
	FirstSessionID    uuid.UUID `json:"firstSessionId"`
}

// SessionHandoffInitiatedEvent records that the current session wrote its handoff;
// start the next session with it.
type SessionHandoffInitiatedEvent struct {
	ChainMeta
	FromSessionID     uuid.UUID `json:"fromSessionId"`
	HandoffDocumentID uuid.UUID `json:"handoffDocumentId"`
}

// SessionAddedToChainEvent records that a continuation session joined the chain.
type SessionAddedToChainEvent struct {
	ChainMeta
	NewSessionID uuid.UUID `json:"newSessionId"`
	Position     int       `json:"position"`
}

// SessionChainCompletedEvent records that the chain's work is done.
type SessionChainCompletedEvent struct {
	ChainMeta
	TotalSessions int `json:"totalSessions"`
	TotalCostUsd  USD `json:"totalCostUsd"`
}

// SessionChainCancelledEvent records that the chain was cancelled; cancel its live sessions.
type SessionChainCancelledEvent struct{ ChainMeta }

// EventType returns "session_chain_created".
func (SessionChainCreatedEvent) EventType() string { return "session_chain_created" }

// EventType returns "session_handoff_initiated".
func (SessionHandoffInitiatedEvent) EventType() string { return "session_handoff_initiated" }

// EventType returns "session_added_to_chain".
func (SessionAddedToChainEvent) EventType() string { return "session_added_to_chain" }

// EventType returns "session_chain_completed".
func (SessionChainCompletedEvent) EventType() string { return "session_chain_completed" }

// EventType returns "session_chain_cancelled".
func (SessionChainCancelledEvent) EventType() string { return "session_chain_cancelled" }
