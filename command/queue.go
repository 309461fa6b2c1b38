package command

import (
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/domain"
)

// The commands of a session's message queue, sent on
// agents.cmd.queue.<name> with the session id as the aggregateId.
const (
	EnqueueMessage = "enqueue_message"
	CancelMessage  = "cancel_message"
	PromoteMessage = "promote_message"
	MarkDelivered  = "mark_delivered"
)

// EnqueueData adds a message; MessageID is chosen by the sender so that
// it can refer to the message at once.
type EnqueueData struct {
	MessageID uuid.UUID              `json:"messageId"`
	Content   string                 `json:"content"`
	Priority  domain.MessagePriority `json:"priority"`
	// Source defaults to User.
	Source domain.MessageSource `json:"source,omitempty"`
}

// MessageData names one message of the queue.
type MessageData struct {
	MessageID uuid.UUID `json:"messageId"`
}

// QueueState is what a queue command returns: the session's messages,
// pending first in delivery order.
type QueueState struct {
	SessionID uuid.UUID               `json:"sessionId"`
	Pending   []domain.SessionMessage `json:"pending"`
	Messages  []domain.SessionMessage `json:"messages"`
}
