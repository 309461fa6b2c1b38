package postgres

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/domain"
)

// Queues stores SessionMessageQueue aggregates, one per session.
type Queues struct{}

type queueDoc struct {
	Messages []domain.SessionMessage `json:"messages"`
}

// Get loads a session's queue; a session without one has an empty queue.
func (Queues) Get(ctx context.Context, q Querier, sessionID, ownerID uuid.UUID) (*domain.SessionMessageQueue, error) {
	var doc queueDoc
	version, err := loadDoc(ctx, q, "message_queues", "session_id", sessionID, &doc)
	if errors.Is(err, ErrNotFound) {
		return domain.NewSessionMessageQueue(sessionID, ownerID)
	}
	if err != nil {
		return nil, err
	}
	return domain.UnmarshalSessionMessageQueueFromDatabase(domain.SessionMessageQueueSnapshot{
		SessionID: sessionID, OwnerID: ownerID, Messages: doc.Messages, Version: version})
}

// Update loads the queue, lets change modify it, and saves it with its events.
func (r Queues) Update(ctx context.Context, tx pgx.Tx, sessionID, ownerID uuid.UUID, change func(*domain.SessionMessageQueue) error) (*domain.SessionMessageQueue, error) {
	q, err := r.Get(ctx, tx, sessionID, ownerID)
	if err != nil {
		return nil, err
	}
	if err := change(q); err != nil {
		return nil, err
	}
	return q, r.Save(ctx, tx, q)
}

// Save writes a queue back, inserting it on its first save.
func (Queues) Save(ctx context.Context, tx pgx.Tx, q *domain.SessionMessageQueue) error {
	doc := queueDoc{Messages: q.Messages()}
	loaded := q.Version()
	var err error
	if loaded == 0 {
		err = insertDoc(ctx, tx, "message_queues", "session_id", q.SessionID(), doc, map[string]any{"owner_id": q.OwnerID()})
		if errors.Is(err, domain.ErrDuplicate) {
			// Another transaction created the queue first.
			err = ErrVersionConflict
		}
	} else {
		err = saveVersioned(ctx, tx, "message_queues", "session_id", q.SessionID(), loaded, doc, nil)
	}
	if err != nil {
		return err
	}
	return writeEvents(ctx, tx, loaded+1, q.PopEvents())
}
