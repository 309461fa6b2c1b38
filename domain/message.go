package domain

import (
	"time"

	"github.com/google/uuid"
)

// AgentMessageSource classifies who wrote a transcript message. The zero
// value is invalid.
type AgentMessageSource string

// The message sources.
const (
	SourceUser     AgentMessageSource = "User"
	SourceSystem   AgentMessageSource = "System"
	SourceAgent    AgentMessageSource = "Agent"
	SourceSubAgent AgentMessageSource = "SubAgent"
	SourceWebhook  AgentMessageSource = "Webhook"
)

// IsValid reports whether s is a known source.
func (s AgentMessageSource) IsValid() bool {
	switch s {
	case SourceUser, SourceSystem, SourceAgent, SourceSubAgent, SourceWebhook:
		return true
	}
	return false
}

// AgentMessage is one classified message of a session's transcript. A
// subagent's messages carry its SubAgentID and belong to its
// SubAgentSession, never to the parent's list; tool results are never
// messages (they belong to their ToolCall). Messages are immutable.
type AgentMessage struct {
	id         uuid.UUID
	sessionID  uuid.UUID
	subAgentID *uuid.UUID
	source     AgentMessageSource
	content    string
	timestamp  time.Time
}

// NewAgentMessage validates and returns a message: content not empty,
// SubAgentID set exactly when the source is SubAgent.
func NewAgentMessage(id, sessionID uuid.UUID, source AgentMessageSource, subAgentID *uuid.UUID, content string, at time.Time) (AgentMessage, error) {
	if err := requireID("messageId", id); err != nil {
		return AgentMessage{}, err
	}
	if err := requireID("sessionId", sessionID); err != nil {
		return AgentMessage{}, err
	}
	if !source.IsValid() {
		return AgentMessage{}, invalid("source", "unknown message source %q", source)
	}
	if source == SourceSubAgent && (subAgentID == nil || *subAgentID == uuid.Nil) {
		return AgentMessage{}, invalid("subAgentId", "must be set for a SubAgent message")
	}
	if source != SourceSubAgent && subAgentID != nil {
		return AgentMessage{}, invalid("subAgentId", "must be empty unless the source is SubAgent")
	}
	if content == "" {
		return AgentMessage{}, invalid("content", "must not be empty")
	}
	return AgentMessage{id: id, sessionID: sessionID, subAgentID: clonePtr(subAgentID), source: source, content: content, timestamp: at.UTC()}, nil
}

// UnmarshalAgentMessageFromDatabase rebuilds a stored message (with the
// same checks as NewAgentMessage).
func UnmarshalAgentMessageFromDatabase(id, sessionID uuid.UUID, source AgentMessageSource, subAgentID *uuid.UUID, content string, at time.Time) (AgentMessage, error) {
	return NewAgentMessage(id, sessionID, source, subAgentID, content, at)
}

// ID returns the message id.
func (m AgentMessage) ID() uuid.UUID { return m.id }

// SessionID returns the session the message belongs to.
func (m AgentMessage) SessionID() uuid.UUID { return m.sessionID }

// SubAgentID returns the subagent that wrote the message, or nil.
func (m AgentMessage) SubAgentID() *uuid.UUID { return clonePtr(m.subAgentID) }

// Source returns who wrote the message.
func (m AgentMessage) Source() AgentMessageSource { return m.source }

// Content returns the text.
func (m AgentMessage) Content() string { return m.content }

// Timestamp returns when the message was written.
func (m AgentMessage) Timestamp() time.Time { return m.timestamp }

// IsTopLevel reports whether the message belongs in the parent session's
// list (every source but SubAgent).
func (m AgentMessage) IsTopLevel() bool { return m.subAgentID == nil }
