package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/domain"
)

// Queues stores SessionMessageQueue aggregates, one per session: the
// Pending messages in the queue's document, the delivered and cancelled
// ones in the session's message history (message_history), which the
// queue moves them to in the same transaction.
type Queues struct{}

type queueDoc struct {
	Messages     []domain.SessionMessage `json:"messages"`
	NextSequence int64                   `json:"nextSequence"`
}

// Get loads a session's queue; a session without one has an empty queue.
// The owner is the session's, whatever ownerID says.
func (r Queues) Get(ctx context.Context, q Querier, sessionID, _ uuid.UUID) (*domain.SessionMessageQueue, error) {
	sq, err := r.Load(ctx, q, sessionID, uuid.Nil)
	if err != nil {
		return nil, err
	}
	return sq.Queue, nil
}

// SessionQueue is a session's queue with what decides what it takes: the
// session's owner and current status.
type SessionQueue struct {
	Queue   *domain.SessionMessageQueue
	OwnerID uuid.UUID
	Status  domain.SessionStatus
}

// Load reads a session's owner, status and queue in one round trip and,
// when message names a message that already left the queue, recalls its
// status (see SessionMessageQueue.Recall). A session that does not exist
// is ErrNotFound.
func (Queues) Load(ctx context.Context, q Querier, sessionID, message uuid.UUID) (SessionQueue, error) {
	var (
		sq      SessionQueue
		status  string
		raw     []byte
		version *int64
		settled *string
	)
	err := q.QueryRow(ctx, `
SELECT s.owner_id, s.status, q.doc, q.version, h.status
  FROM sessions s
  LEFT JOIN message_queues q ON q.session_id = s.id
  LEFT JOIN message_history h ON h.message_id = $2 AND h.session_id = s.id
 WHERE s.id = $1`, sessionID, message).Scan(&sq.OwnerID, &status, &raw, &version, &settled)
	if errors.Is(err, pgx.ErrNoRows) {
		return SessionQueue{}, fmt.Errorf("sessions %s: %w", sessionID, ErrNotFound)
	}
	if err != nil {
		return SessionQueue{}, err
	}
	sq.Status = domain.SessionStatus(status)
	snap := domain.SessionMessageQueueSnapshot{SessionID: sessionID, OwnerID: sq.OwnerID}
	if version != nil {
		var doc queueDoc
		if err := jsonv1.Unmarshal(raw, &doc); err != nil {
			return SessionQueue{}, fmt.Errorf("message_queues %s: stored document unreadable: %w", sessionID, err)
		}
		snap.Messages, snap.NextSequence, snap.Version = doc.Messages, doc.NextSequence, *version
	}
	if sq.Queue, err = domain.UnmarshalSessionMessageQueueFromDatabase(snap); err != nil {
		return SessionQueue{}, err
	}
	if settled != nil {
		sq.Queue.Recall(message, domain.MessageStatus(*settled))
	}
	return sq, nil
}

// HoldStatus lets tx commit only while the session still has status, the
// one its queue was loaded with (Load reads it without a lock), and keeps
// it so until tx ends: the check takes the session's row FOR SHARE, so a
// status change waits for tx's commit, and one committed since the load
// fails tx as a version conflict (the command is then tried on the new
// status). An enqueued message's event then names the status the session
// had when the message joined its queue, and whoever changes that status
// reads a queue that holds the message: a reaction may trust the event.
//
// In a DeferredOutboxTx the check waits for Flush, the transaction's last
// round trip: the commands worker holds its aggregates' gates by then, so
// a session command, which takes the same gate before it writes the
// session, never waits for this lock while holding what this transaction
// needs next.
func (Queues) HoldStatus(ctx context.Context, tx pgx.Tx, sessionID uuid.UUID, status domain.SessionStatus) error {
	return versionConflictFrom(execOrDefer(ctx, tx, `
SELECT version_conflict('sessions', $1::uuid::text)
 WHERE NOT EXISTS (SELECT FROM sessions WHERE id = $1 AND status = $2 FOR SHARE)`,
		[]any{sessionID, string(status)}, nil))
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

// Save writes a queue back, inserting it on its first save, and moves the
// messages that left it to the session's message history.
func (Queues) Save(ctx context.Context, tx pgx.Tx, q *domain.SessionMessageQueue) error {
	doc := queueDoc{Messages: q.Messages(), NextSequence: q.NextSequence()}
	loaded := q.Version()
	var err error
	if loaded == 0 {
		err = insertDoc(ctx, tx, "message_queues", "session_id", q.SessionID(), doc, map[string]any{"owner_id": q.OwnerID()})
		if errors.Is(err, domain.ErrDuplicate) {
			// Another transaction created the queue first.
			err = ErrVersionConflict
		}
	} else {
		// In a DeferredOutboxTx the update and the moves to the history
		// wait for the commit's round trip, which may carry the COMMIT
		// too: the version is checked in the server, and a conflict fails
		// the update and everything after it.
		var (
			sql  string
			args []any
		)
		sql, args, err = checkedVersionedUpdate("message_queues", "session_id", q.SessionID(), loaded, doc, nil)
		if err == nil {
			err = versionConflictFrom(execOrDefer(ctx, tx, sql, args, nil))
		}
	}
	if err != nil {
		return err
	}
	for _, m := range q.Settled() {
		raw, err := json.Marshal(m)
		if err != nil {
			return err
		}
		if err := execOrDefer(ctx, tx, `
INSERT INTO message_history (message_id, session_id, sequence, status, doc) VALUES ($1, $2, $3, $4, $5)`,
			[]any{m.MessageID, q.SessionID(), m.Sequence, string(m.Status), raw}, nil); err != nil {
			return err
		}
	}
	return writeEvents(ctx, tx, loaded+1, q.PopEvents())
}
