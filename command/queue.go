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

// QueueState is what a queue command returns: the session's pending
// messages in delivery order, and the sequence number the next message
// would get, which dates the answer: every message enqueued before it has
// a lower one. Delivered and cancelled messages are in the session's
// message history (see queries.Store.QueueAt).
type QueueState struct {
	SessionID    uuid.UUID               `json:"sessionId"`
	Pending      []domain.SessionMessage `json:"pending"`
	NextSequence int64                   `json:"nextSequence"`
	// Settled are the messages this command delivered or cancelled: they
	// left the queue for the session's message history.
	Settled []domain.SessionMessage `json:"settled,omitempty"`
	// Messages, every message of the session, is set only in answers
	// recorded while the queue held its delivered and cancelled messages.
	Messages []domain.SessionMessage `json:"messages,omitempty"`
	// SessionStatus is the session's status as the command read it with
	// the queue.
	SessionStatus domain.SessionStatus `json:"sessionStatus,omitempty"`
}
