package domain

import (
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// SessionMessageQueue is the aggregate root of the messages waiting for a
// session; it shares the session's id. Users see it and manage it: they
// cancel pending messages and promote queued ones to Immediate.
type SessionMessageQueue struct {
	eventRecorder

	sessionID uuid.UUID
	ownerID   uuid.UUID
	messages  []SessionMessage
	nextSeq   int64
	version   int64
}

// NewSessionMessageQueue returns the empty queue of a session.
func NewSessionMessageQueue(sessionID, ownerID uuid.UUID) (*SessionMessageQueue, error) {
	if err := requireID("sessionId", sessionID); err != nil {
		return nil, err
	}
	if err := requireID("ownerId", ownerID); err != nil {
		return nil, err
	}
	return &SessionMessageQueue{sessionID: sessionID, ownerID: ownerID}, nil
}

// SessionMessageQueueSnapshot is the stored state of a queue.
type SessionMessageQueueSnapshot struct {
	SessionID uuid.UUID        `json:"sessionId"`
	OwnerID   uuid.UUID        `json:"ownerId"`
	Messages  []SessionMessage `json:"messages"`
	Version   int64            `json:"version"`
}

// Snapshot returns the queue as plain values.
func (q *SessionMessageQueue) Snapshot() SessionMessageQueueSnapshot {
	return SessionMessageQueueSnapshot{SessionID: q.sessionID, OwnerID: q.ownerID, Messages: q.Messages(), Version: q.version}
}

// UnmarshalSessionMessageQueueFromDatabase rebuilds a stored queue.
func UnmarshalSessionMessageQueueFromDatabase(snap SessionMessageQueueSnapshot) (*SessionMessageQueue, error) {
	q, err := NewSessionMessageQueue(snap.SessionID, snap.OwnerID)
	if err != nil {
		return nil, err
	}
	seen := map[uuid.UUID]bool{}
	for _, m := range snap.Messages {
		if m.MessageID == uuid.Nil || seen[m.MessageID] {
			return nil, invalid("messages", "message ids must be set and unique")
		}
		seen[m.MessageID] = true
		if !m.Priority.IsValid() || !m.Source.IsValid() ||
			(m.Status != MessagePending && m.Status != MessageDelivered && m.Status != MessageCancelled) {
			return nil, invalid("messages", "message %s has an unknown priority, source or status", m.MessageID)
		}
		q.messages = append(q.messages, m.clone())
		q.nextSeq = max(q.nextSeq, m.Sequence+1)
	}
	q.version = snap.Version
	return q, nil
}

func (q *SessionMessageQueue) meta(now time.Time) QueueMeta {
	return QueueMeta{SessionID: q.sessionID, OwnerID: q.ownerID, OccurredAt: now.UTC()}
}

// Enqueue adds a Pending message. sessionStatus is the session's current
// status: terminal, ContextExhausted and Cancelling sessions take no more
// messages. Messages for a session waiting for input or approval are
// accepted and wait (see DeliverableIn).
func (q *SessionMessageQueue) Enqueue(id uuid.UUID, content string, priority MessagePriority, source MessageSource, sessionStatus SessionStatus, now time.Time) (SessionMessage, error) {
	if !sessionStatus.AcceptsMessages() {
		return SessionMessage{}, &TransitionError{Aggregate: "AgentSession", Operation: "Enqueue", Status: string(sessionStatus), Reason: ErrInvalidTransition}
	}
	if err := requireID("messageId", id); err != nil {
		return SessionMessage{}, err
	}
	if n := chars(content); n < 1 || n > MaxMessageChars || strings.TrimSpace(content) == "" {
		return SessionMessage{}, invalid("content", "must be 1-%d characters and not blank, got %d", MaxMessageChars, n)
	}
	if !priority.IsValid() {
		return SessionMessage{}, invalid("priority", "unknown priority %q", priority)
	}
	if !source.IsValid() {
		return SessionMessage{}, invalid("source", "unknown source %q", source)
	}
	if i := q.index(id); i >= 0 {
		return SessionMessage{}, &TransitionError{Aggregate: "SessionMessage", Operation: "Enqueue", Status: string(q.messages[i].Status), Reason: ErrDuplicate}
	}
	m := SessionMessage{MessageID: id, Content: content, Priority: priority, Status: MessagePending, Source: source,
		Sequence: q.nextSeq, CreatedAt: now.UTC()}
	q.nextSeq++
	q.messages = append(q.messages, m)
	q.raise(MessageEnqueuedEvent{QueueMeta: q.meta(now), MessageID: id, Priority: priority, Source: source})
	return m, nil
}

// Cancel cancels a Pending message; a delivered or cancelled one cannot be.
func (q *SessionMessageQueue) Cancel(id uuid.UUID, now time.Time) error {
	m, err := q.pending(id, "Cancel")
	if err != nil {
		return err
	}
	t := now.UTC()
	m.Status, m.CancelledAt = MessageCancelled, &t
	q.raise(MessageCancelledEvent{QueueMeta: q.meta(now), MessageID: id})
	return nil
}

// Promote makes a Pending Queued message Immediate; an Immediate one, or
// one no longer Pending, cannot be promoted.
func (q *SessionMessageQueue) Promote(id uuid.UUID, now time.Time) error {
	m, err := q.pending(id, "Promote")
	if err != nil {
		return err
	}
	if m.Priority == PriorityImmediate {
		return &TransitionError{Aggregate: "SessionMessage", Operation: "Promote", Status: string(PriorityImmediate), Reason: ErrInvalidTransition}
	}
	m.Priority = PriorityImmediate
	q.raise(MessagePromotedToImmediateEvent{QueueMeta: q.meta(now), MessageID: id})
	return nil
}

// MarkDelivered records the sidecar's acknowledgement of a Pending message.
func (q *SessionMessageQueue) MarkDelivered(id uuid.UUID, now time.Time) error {
	m, err := q.pending(id, "MarkDelivered")
	if err != nil {
		return err
	}
	t := now.UTC()
	m.Status, m.DeliveredAt = MessageDelivered, &t
	q.raise(MessageDeliveredEvent{QueueMeta: q.meta(now), MessageID: id, DeliveredAt: t})
	return nil
}

// pending finds a message that must be Pending for op.
func (q *SessionMessageQueue) pending(id uuid.UUID, op string) (*SessionMessage, error) {
	i := q.index(id)
	if i < 0 {
		return nil, &NotFoundError{Entity: "SessionMessage", ID: id.String()}
	}
	m := &q.messages[i]
	if m.Status != MessagePending {
		return nil, &TransitionError{Aggregate: "SessionMessage", Operation: op, Status: string(m.Status), Reason: ErrInvalidTransition}
	}
	return m, nil
}

func (q *SessionMessageQueue) index(id uuid.UUID) int {
	return slices.IndexFunc(q.messages, func(m SessionMessage) bool { return m.MessageID == id })
}

// Pending returns the Pending messages in delivery order: Immediate
// before Queued, each first-in first-out.
func (q *SessionMessageQueue) Pending() []SessionMessage {
	var out []SessionMessage
	for _, m := range q.messages {
		if m.Status == MessagePending {
			out = append(out, m.clone())
		}
	}
	slices.SortStableFunc(out, func(a, b SessionMessage) int {
		switch {
		case a.deliversBefore(b):
			return -1
		case b.deliversBefore(a):
			return 1
		}
		return 0
	})
	return out
}

// NextPending returns the next message to deliver to a session in
// sessionStatus, or false when none may be delivered now (nothing is
// pending, or the session cannot take the first one yet: a Queued message
// waits for the running turn to end, and everything waits while the
// session waits for input or approval).
func (q *SessionMessageQueue) NextPending(sessionStatus SessionStatus) (SessionMessage, bool) {
	// Pending is ordered, Immediate first: if the first message may not
	// be delivered, no later one may either.
	p := q.Pending()
	if len(p) == 0 || !DeliverableIn(sessionStatus, p[0].Priority) {
		return SessionMessage{}, false
	}
	return p[0], true
}

// Messages returns every message, pending or not, in arrival order.
func (q *SessionMessageQueue) Messages() []SessionMessage {
	out := make([]SessionMessage, len(q.messages))
	for i, m := range q.messages {
		out[i] = m.clone()
	}
	return out
}

// Message returns one message by id.
func (q *SessionMessageQueue) Message(id uuid.UUID) (SessionMessage, bool) {
	i := q.index(id)
	if i < 0 {
		return SessionMessage{}, false
	}
	return q.messages[i].clone(), true
}

// SessionID returns the session (and queue) id.
func (q *SessionMessageQueue) SessionID() uuid.UUID { return q.sessionID }

// OwnerID returns the session's owner.
func (q *SessionMessageQueue) OwnerID() uuid.UUID { return q.ownerID }

// Version returns the version the queue was loaded at, for the optimistic lock.
func (q *SessionMessageQueue) Version() int64 { return q.version }
