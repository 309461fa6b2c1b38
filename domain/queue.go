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
//
// It holds only Pending messages. A delivered or cancelled message leaves
// it (Settled lists those that left since it was loaded) and lives on in
// the session's message history, so the cost of every operation follows
// what still waits, not everything the session was ever sent.
type SessionMessageQueue struct {
	eventRecorder

	sessionID uuid.UUID
	ownerID   uuid.UUID
	messages  []SessionMessage
	nextSeq   int64
	version   int64

	// settled are the messages that left the queue since it was loaded.
	settled []SessionMessage
	// recalled are the statuses of messages that left it before, as far
	// as the caller told (Recall).
	recalled map[uuid.UUID]MessageStatus
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

// SessionMessageQueueSnapshot is the stored state of a queue: its Pending
// messages and the sequence number the next message gets.
type SessionMessageQueueSnapshot struct {
	SessionID    uuid.UUID        `json:"sessionId"`
	OwnerID      uuid.UUID        `json:"ownerId"`
	Messages     []SessionMessage `json:"messages"`
	NextSequence int64            `json:"nextSequence"`
	Version      int64            `json:"version"`
}

// Snapshot returns the queue as plain values.
func (q *SessionMessageQueue) Snapshot() SessionMessageQueueSnapshot {
	return SessionMessageQueueSnapshot{SessionID: q.sessionID, OwnerID: q.ownerID, Messages: q.Messages(),
		NextSequence: q.nextSeq, Version: q.version}
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
		if !m.Priority.IsValid() || !m.Source.IsValid() || m.Status != MessagePending {
			return nil, invalid("messages", "message %s has an unknown priority or source, or is not Pending", m.MessageID)
		}
		q.messages = append(q.messages, m.clone())
		q.nextSeq = max(q.nextSeq, m.Sequence+1)
	}
	q.nextSeq = max(q.nextSeq, snap.NextSequence)
	q.version = snap.Version
	return q, nil
}

// Recall tells the queue that message id left it before, as status
// (Delivered or Cancelled), so that an operation naming it is refused for
// that status rather than as unknown, and its id is not taken again.
func (q *SessionMessageQueue) Recall(id uuid.UUID, status MessageStatus) {
	if status != MessageDelivered && status != MessageCancelled {
		return
	}
	if q.recalled == nil {
		q.recalled = map[uuid.UUID]MessageStatus{}
	}
	q.recalled[id] = status
}

// Settled returns the messages delivered or cancelled since the queue was
// loaded, which have left it, in the order they left.
func (q *SessionMessageQueue) Settled() []SessionMessage {
	out := make([]SessionMessage, len(q.settled))
	for i, m := range q.settled {
		out[i] = m.clone()
	}
	return out
}

// settledStatus returns the status of a message that left the queue.
func (q *SessionMessageQueue) settledStatus(id uuid.UUID) (MessageStatus, bool) {
	if i := slices.IndexFunc(q.settled, func(m SessionMessage) bool { return m.MessageID == id }); i >= 0 {
		return q.settled[i].Status, true
	}
	st, ok := q.recalled[id]
	return st, ok
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
	if st, ok := q.settledStatus(id); ok {
		return SessionMessage{}, &TransitionError{Aggregate: "SessionMessage", Operation: "Enqueue", Status: string(st), Reason: ErrDuplicate}
	}
	m := SessionMessage{MessageID: id, Content: content, Priority: priority, Status: MessagePending, Source: source,
		Sequence: q.nextSeq, CreatedAt: now.UTC()}
	q.nextSeq++
	q.messages = append(q.messages, m)
	q.raise(MessageEnqueuedEvent{QueueMeta: q.meta(now), MessageID: id, Priority: priority, Source: source,
		Content: content, SessionStatus: sessionStatus})
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
	q.settle(id)
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
	q.settle(id)
	q.raise(MessageDeliveredEvent{QueueMeta: q.meta(now), MessageID: id, DeliveredAt: t})
	return nil
}

// settle moves a message that is no longer Pending out of the queue.
func (q *SessionMessageQueue) settle(id uuid.UUID) {
	i := q.index(id)
	q.settled = append(q.settled, q.messages[i])
	q.messages = slices.Delete(q.messages, i, i+1)
}

// pending finds a message that must be Pending for op.
func (q *SessionMessageQueue) pending(id uuid.UUID, op string) (*SessionMessage, error) {
	i := q.index(id)
	if i >= 0 {
		return &q.messages[i], nil
	}
	if st, ok := q.settledStatus(id); ok {
		return nil, &TransitionError{Aggregate: "SessionMessage", Operation: op, Status: string(st), Reason: ErrInvalidTransition}
	}
	return nil, &NotFoundError{Entity: "SessionMessage", ID: id.String()}
}

func (q *SessionMessageQueue) index(id uuid.UUID) int {
	return slices.IndexFunc(q.messages, func(m SessionMessage) bool { return m.MessageID == id })
}

// Pending returns the Pending messages in delivery order: Immediate
// before Queued, each first-in first-out.
func (q *SessionMessageQueue) Pending() []SessionMessage {
	var out []SessionMessage
	for _, m := range q.messages {
		out = append(out, m.clone())
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

// Messages returns the Pending messages in arrival order.
func (q *SessionMessageQueue) Messages() []SessionMessage {
	out := make([]SessionMessage, len(q.messages))
	for i, m := range q.messages {
		out[i] = m.clone()
	}
	return out
}

// Message returns one message by id: a Pending one, or one that left the
// queue since it was loaded.
func (q *SessionMessageQueue) Message(id uuid.UUID) (SessionMessage, bool) {
	if i := q.index(id); i >= 0 {
		return q.messages[i].clone(), true
	}
	if i := slices.IndexFunc(q.settled, func(m SessionMessage) bool { return m.MessageID == id }); i >= 0 {
		return q.settled[i].clone(), true
	}
	return SessionMessage{}, false
}

// NextSequence returns the sequence number the next enqueued message gets:
// every message enqueued so far has a lower one.
func (q *SessionMessageQueue) NextSequence() int64 { return q.nextSeq }

// SessionID returns the session (and queue) id.
func (q *SessionMessageQueue) SessionID() uuid.UUID { return q.sessionID }

// OwnerID returns the session's owner.
func (q *SessionMessageQueue) OwnerID() uuid.UUID { return q.ownerID }

// Version returns the version the queue was loaded at, for the optimistic lock.
func (q *SessionMessageQueue) Version() int64 { return q.version }
