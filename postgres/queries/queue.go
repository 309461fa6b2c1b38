package queries

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/domain"
)

// QueueView is a session's message queue as the UI shows it
// (GetSessionMessageQueueQuery).
type QueueView struct {
	SessionID uuid.UUID
	// Pending are the messages still to deliver, in delivery order:
	// Immediate first, then Queued, each first-in first-out.
	Pending []domain.SessionMessage
	// Messages are all messages, delivered and cancelled included, in
	// arrival order.
	Messages []domain.SessionMessage
}

// Queue returns the message queue of the owner's session id. A session
// that never had a message has an empty queue. The queue and the session's
// message history are read in one statement, so they agree.
func (s *Store) Queue(ctx context.Context, owner, id uuid.UUID) (QueueView, error) {
	var (
		raw, history []byte
		version      *int64
	)
	err := s.db.QueryRow(ctx, `
SELECT q.doc, q.version,
       (SELECT COALESCE(jsonb_agg(h.doc ORDER BY h.sequence), '[]') FROM message_history h WHERE h.session_id = s.id)
  FROM sessions s LEFT JOIN message_queues q ON q.session_id = s.id
 WHERE s.id = $1 AND s.owner_id = $2`, id, owner).Scan(&raw, &version, &history)
	if errors.Is(err, pgx.ErrNoRows) {
		return QueueView{}, &NotFoundError{Entity: "session", ID: id.String()}
	}
	if err != nil {
		return QueueView{}, fmt.Errorf("queries: queue of %s: %w", id, err)
	}
	var doc struct {
		Messages     []domain.SessionMessage `json:"messages"`
		NextSequence int64                   `json:"nextSequence"`
	}
	if raw != nil {
		if err := jsonv1.Unmarshal(raw, &doc); err != nil {
			return QueueView{}, fmt.Errorf("queries: queue of %s unreadable: %w", id, err)
		}
	}
	var settled []domain.SessionMessage
	if err := jsonv1.Unmarshal(history, &settled); err != nil {
		return QueueView{}, fmt.Errorf("queries: message history of %s unreadable: %w", id, err)
	}
	var v int64
	if version != nil {
		v = *version
	}
	// The aggregate owns the delivery order; rebuilding it keeps one
	// definition of that order.
	q, err := domain.UnmarshalSessionMessageQueueFromDatabase(domain.SessionMessageQueueSnapshot{
		SessionID: id, OwnerID: owner, Messages: doc.Messages, NextSequence: doc.NextSequence, Version: v})
	if err != nil {
		return QueueView{}, fmt.Errorf("queries: queue of %s: %w", id, err)
	}
	return QueueView{SessionID: id, Pending: nonNil(q.Pending()), Messages: byArrival(settled, q.Messages())}, nil
}

// QueueAt returns the view of session id's queue as a queue command left
// it: pending, its pending messages, and every message enqueued before
// next. The messages that left the queue by then come from the session's
// message history; those that left it since are still pending in that
// view, and those enqueued since are not in it.
func (s *Store) QueueAt(ctx context.Context, id uuid.UUID, pending []domain.SessionMessage, next int64) (QueueView, error) {
	var history []byte
	err := s.db.QueryRow(ctx, `
SELECT COALESCE(jsonb_agg(h.doc ORDER BY h.sequence), '[]')
  FROM message_history h WHERE h.session_id = $1 AND h.sequence < $2`, id, next).Scan(&history)
	if err != nil {
		return QueueView{}, fmt.Errorf("queries: message history of %s: %w", id, err)
	}
	var settled []domain.SessionMessage
	if err := jsonv1.Unmarshal(history, &settled); err != nil {
		return QueueView{}, fmt.Errorf("queries: message history of %s unreadable: %w", id, err)
	}
	waiting := map[uuid.UUID]bool{}
	for _, m := range pending {
		waiting[m.MessageID] = true
	}
	settled = slices.DeleteFunc(settled, func(m domain.SessionMessage) bool { return waiting[m.MessageID] })
	return QueueView{SessionID: id, Pending: nonNil(pending), Messages: byArrival(settled, pending)}, nil
}

// byArrival merges messages that left the queue with those still in it,
// in order of arrival.
func byArrival(settled, pending []domain.SessionMessage) []domain.SessionMessage {
	out := append(slices.Clone(settled), pending...)
	slices.SortStableFunc(out, func(a, b domain.SessionMessage) int { return cmp.Compare(a.Sequence, b.Sequence) })
	return nonNil(out)
}

func nonNil(ms []domain.SessionMessage) []domain.SessionMessage {
	if ms == nil {
		return []domain.SessionMessage{}
	}
	return ms
}
