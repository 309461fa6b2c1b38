package domain

import (
	"time"

	"github.com/google/uuid"
)

// SessionAllocatedEvent records that the pool gave the session a slot (it starts).
type SessionAllocatedEvent struct {
	SessionMeta
	ActiveCount int `json:"activeCount"`
	MaxCount    int `json:"maxCount"`
}

// SessionReleasedEvent records that the session gave its pool slot back.
type SessionReleasedEvent struct {
	SessionMeta
	ActiveCount int `json:"activeCount"`
	MaxCount    int `json:"maxCount"`
}

// SessionPoolExhaustedEvent records that no slot was free; the session stays Queued.
type SessionPoolExhaustedEvent struct {
	SessionMeta
	// AttemptedSessionID is the session that could not start (= SessionID).
	AttemptedSessionID uuid.UUID `json:"attemptedSessionId"`
	CurrentCount       int       `json:"currentCount"`
	MaxCount           int       `json:"maxCount"`
}

// MessageEnqueuedEvent records that a message was added to a session's
// queue. It carries the message and the session's status when it was
// enqueued, so that the delivery reaction can steer a running session
// without reading either back.
type MessageEnqueuedEvent struct {
	QueueMeta
	MessageID     uuid.UUID       `json:"messageId"`
	Priority      MessagePriority `json:"priority"`
	Source        MessageSource   `json:"source"`
	Content       string          `json:"content"`
	SessionStatus SessionStatus   `json:"sessionStatus"`
}

// MessageDeliveredEvent records that the sidecar acknowledged a message.
type MessageDeliveredEvent struct {
	QueueMeta
	MessageID   uuid.UUID `json:"messageId"`
	DeliveredAt time.Time `json:"deliveredAt"`
}

// MessageCancelledEvent records that a pending message was cancelled before delivery.
type MessageCancelledEvent struct {
	QueueMeta
	MessageID uuid.UUID `json:"messageId"`
}

// MessagePromotedToImmediateEvent records that a queued message became Immediate.
type MessagePromotedToImmediateEvent struct {
	QueueMeta
	MessageID uuid.UUID `json:"messageId"`
}

// EventType returns "session_allocated".
func (SessionAllocatedEvent) EventType() string { return "session_allocated" }

// EventType returns "session_released".
func (SessionReleasedEvent) EventType() string { return "session_released" }

// EventType returns "session_pool_exhausted".
func (SessionPoolExhaustedEvent) EventType() string { return "session_pool_exhausted" }

// EventType returns "message_enqueued".
func (MessageEnqueuedEvent) EventType() string { return "message_enqueued" }

// EventType returns "message_delivered".
func (MessageDeliveredEvent) EventType() string { return "message_delivered" }

// EventType returns "message_cancelled".
func (MessageCancelledEvent) EventType() string { return "message_cancelled" }

// EventType returns "message_promoted_to_immediate".
func (MessagePromotedToImmediateEvent) EventType() string { return "message_promoted_to_immediate" }
