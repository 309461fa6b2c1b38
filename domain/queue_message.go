package domain

import (
	"time"

	"github.com/google/uuid"
)

// MaxMessageChars bounds a queued message.
const MaxMessageChars = 4000

// MessagePriority says when a queued message reaches the agent. The zero
// value is invalid.
type MessagePriority string

// The priorities.
const (
	// PriorityImmediate steers the running turn as soon as possible.
	PriorityImmediate MessagePriority = "Immediate"
	// PriorityQueued waits for the current turn to end.
	PriorityQueued MessagePriority = "Queued"
)

// IsValid reports whether p is a known priority.
func (p MessagePriority) IsValid() bool { return p == PriorityImmediate || p == PriorityQueued }

// rank orders priorities for delivery: Immediate first.
func (p MessagePriority) rank() int {
	if p == PriorityImmediate {
		return 0
	}
	return 1
}

// MessageStatus is the state of a queued message. The zero value is invalid.
type MessageStatus string

// The message statuses.
const (
	MessagePending   MessageStatus = "Pending"
	MessageDelivered MessageStatus = "Delivered"
	MessageCancelled MessageStatus = "Cancelled"
)

// MessageSource says who enqueued a message. The zero value is invalid.
type MessageSource string

// The sources.
const (
	MessageFromUser    MessageSource = "User"
	MessageFromSystem  MessageSource = "System"
	MessageFromWebhook MessageSource = "Webhook"
)

// IsValid reports whether s is a known source.
func (s MessageSource) IsValid() bool {
	return s == MessageFromUser || s == MessageFromSystem || s == MessageFromWebhook
}

// SessionMessage is one message of a session's queue. Sequence is the
// order of arrival in the queue, the tie-break when two messages share a
// CreatedAt.
type SessionMessage struct {
	MessageID   uuid.UUID       `json:"messageId"`
	Content     string          `json:"content"`
	Priority    MessagePriority `json:"priority"`
	Status      MessageStatus   `json:"status"`
	Source      MessageSource   `json:"source"`
	Sequence    int64           `json:"sequence"`
	CreatedAt   time.Time       `json:"createdAt"`
	DeliveredAt *time.Time      `json:"deliveredAt,omitempty"`
	CancelledAt *time.Time      `json:"cancelledAt,omitempty"`
}

// deliversBefore orders pending messages: Immediate before Queued, then
// by CreatedAt, then by arrival.
func (m SessionMessage) deliversBefore(o SessionMessage) bool {
	if m.Priority.rank() != o.Priority.rank() {
		return m.Priority.rank() < o.Priority.rank()
	}
	if !m.CreatedAt.Equal(o.CreatedAt) {
		return m.CreatedAt.Before(o.CreatedAt)
	}
	return m.Sequence < o.Sequence
}

func (m SessionMessage) clone() SessionMessage {
	m.DeliveredAt = clonePtr(m.DeliveredAt)
	m.CancelledAt = clonePtr(m.CancelledAt)
	return m
}

// DeliverableIn reports which priorities a session in status st can take
// now: a running turn takes only Immediate (steering) messages; an Idle or
// Interrupted session takes either, which starts its next turn; in every
// other status messages wait (a session waiting for input or approval, one
// in a lifecycle transition, a paused or queued one).
func DeliverableIn(st SessionStatus, p MessagePriority) bool {
	switch st {
	case StatusRunning:
		return p == PriorityImmediate
	case StatusIdle, StatusInterrupted:
		return p.IsValid()
	}
	return false
}
