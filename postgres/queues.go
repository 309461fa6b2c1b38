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
	return loadQueue(ctx, q, sessionID, message, "")
}

// LoadHolding is Load for a transaction whose changes to the queue say
// what status the session had: it also takes the session's row FOR SHARE,
// so the session keeps that status until tx ends. A status change waits
// for tx's commit, and reads a queue that holds what tx wrote; one that
// was not committed yet when tx read is waited for, and tx reads the
// status it left. An enqueued message's event then names the status the
// session had when the message joined its queue, and a reaction may trust
// it.
//
// The lock is taken before any other of tx, and the session's writers
// (Sessions.Save) lock its row as they write it, before the commands
// worker's gates: neither holds a gate while it waits for the other.
func (Queues) LoadHolding(ctx context.Context, tx pgx.Tx, sessionID, message uuid.UUID) (SessionQueue, error) {
	return loadQueue(ctx, tx, sessionID, message, "\n   FOR SHARE OF s")
}

func loadQueue(ctx context.Context, q Querier, sessionID, message uuid.UUID, lock string) (SessionQueue, error) {
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
 WHERE s.id = $1`+lock, sessionID, message).Scan(&sq.OwnerID, &status, &raw, &version, &settled)
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
