package queries

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

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
// that never had a message has an empty queue.
func (s *Store) Queue(ctx context.Context, owner, id uuid.UUID) (QueueView, error) {
	var (
		raw     []byte
		version *int64
	)
	err := s.db.QueryRow(ctx, `
SELECT q.doc, q.version
  FROM sessions s LEFT JOIN message_queues q ON q.session_id = s.id
 WHERE s.id = $1 AND s.owner_id = $2`, id, owner).Scan(&raw, &version)
	if errors.Is(err, pgx.ErrNoRows) {
		return QueueView{}, &NotFoundError{Entity: "session", ID: id.String()}
	}
	if err != nil {
		return QueueView{}, fmt.Errorf("queries: queue of %s: %w", id, err)
	}
	var doc struct {
		Messages []domain.SessionMessage `json:"messages"`
	}
	if raw != nil {
		if err := json.Unmarshal(raw, &doc); err != nil {
			return QueueView{}, fmt.Errorf("queries: queue of %s unreadable: %w", id, err)
		}
	}
	var v int64
	if version != nil {
		v = *version
	}
	// The aggregate owns the delivery order; rebuilding it keeps one
	// definition of that order.
	q, err := domain.UnmarshalSessionMessageQueueFromDatabase(domain.SessionMessageQueueSnapshot{
		SessionID: id, OwnerID: owner, Messages: doc.Messages, Version: v})
	if err != nil {
		return QueueView{}, fmt.Errorf("queries: queue of %s: %w", id, err)
	}
	return QueueViewOf(q), nil
}

// QueueViewOf returns the view of a queue.
func QueueViewOf(q *domain.SessionMessageQueue) QueueView {
	v := QueueView{SessionID: q.SessionID(), Pending: q.Pending(), Messages: q.Messages()}
	if v.Pending == nil {
		v.Pending = []domain.SessionMessage{}
	}
	return v
}
