package postgres_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/postgres"
)

// TestQueueKeepsPendingAndMovesTheRestToHistory: a queue stores only its
// pending messages; a delivered or cancelled one moves to the message
// history in the same transaction, and a later command naming it is
// refused for its status, not as unknown.
func TestQueueKeepsPendingAndMovesTheRestToHistory(t *testing.T) {
	ctx := context.Background()
	pool := testenv.Postgres(t)
	id, _ := newSession(t, pool)
	a, b, c := uuid.New(), uuid.New(), uuid.New()
	now := time.Now().UTC()
	update := func(message uuid.UUID, change func(q *domain.SessionMessageQueue) error) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			sq, err := postgres.Queues{}.Load(ctx, tx, id, message)
			if err != nil {
				return err
			}
			if err := change(sq.Queue); err != nil {
				return err
			}
			return postgres.Queues{}.Save(ctx, tx, sq.Queue)
		})
	}
	require.NoError(t, update(uuid.Nil, func(q *domain.SessionMessageQueue) error {
		for _, m := range []uuid.UUID{a, b, c} {
			if _, err := q.Enqueue(m, "message "+m.String(), domain.PriorityQueued, domain.MessageFromUser, domain.StatusRunning, now); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, update(a, func(q *domain.SessionMessageQueue) error { return q.MarkDelivered(a, now) }))
	require.NoError(t, update(b, func(q *domain.SessionMessageQueue) error { return q.Cancel(b, now) }))

	var doc struct {
		Messages     []domain.SessionMessage `json:"messages"`
		NextSequence int64                   `json:"nextSequence"`
	}
	var raw []byte
	require.NoError(t, pool.QueryRow(ctx, "SELECT doc FROM message_queues WHERE session_id = $1", id).Scan(&raw))
	require.NoError(t, json.Unmarshal(raw, &doc))
	require.Len(t, doc.Messages, 1, "the queue's document holds what still waits")
	assert.Equal(t, c, doc.Messages[0].MessageID)
	assert.Equal(t, int64(3), doc.NextSequence)
	statuses := map[uuid.UUID]string{}
	rows, err := pool.Query(ctx, "SELECT message_id, status FROM message_history WHERE session_id = $1", id)
	require.NoError(t, err)
	for rows.Next() {
		var m uuid.UUID
		var st string
		require.NoError(t, rows.Scan(&m, &st))
		statuses[m] = st
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, map[uuid.UUID]string{a: "Delivered", b: "Cancelled"}, statuses)

	var te *domain.TransitionError
	require.ErrorAs(t, update(a, func(q *domain.SessionMessageQueue) error { return q.Cancel(a, now) }), &te)
	assert.Equal(t, "Delivered", te.CurrentStatus())
	err = update(b, func(q *domain.SessionMessageQueue) error {
		_, err := q.Enqueue(b, "again", domain.PriorityQueued, domain.MessageFromUser, domain.StatusRunning, now)
		return err
	})
	require.ErrorIs(t, err, domain.ErrDuplicate, "a message id that left the queue is not taken again")
	require.ErrorIs(t, update(uuid.New(), func(q *domain.SessionMessageQueue) error { return q.Cancel(uuid.New(), now) }), domain.ErrNotFound)
	_, err = postgres.Queues{}.Load(ctx, pool, uuid.New(), uuid.Nil)
	require.ErrorIs(t, err, postgres.ErrNotFound, "a session that does not exist has no queue")
}

// TestMessageHistoryMigrationMovesSettledMessages: the migration that
// introduced the message history moves the delivered and cancelled
// messages of existing queues there and keeps their pending ones and
// their sequence.
func TestMessageHistoryMigrationMovesSettledMessages(t *testing.T) {
	ctx := context.Background()
	pool := testenv.Postgres(t)
	id, _ := newSession(t, pool)
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	msg := func(seq int64, status domain.MessageStatus) domain.SessionMessage {
		m := domain.SessionMessage{MessageID: uuid.New(), Content: "m", Priority: domain.PriorityQueued, Status: status,
			Source: domain.MessageFromUser, Sequence: seq, CreatedAt: at}
		if status == domain.MessageDelivered {
			m.DeliveredAt = &at
		}
		return m
	}
	old := []domain.SessionMessage{msg(0, domain.MessageDelivered), msg(1, domain.MessagePending),
		msg(2, domain.MessageCancelled), msg(3, domain.MessagePending), msg(4, domain.MessageDelivered)}
	raw, err := json.Marshal(map[string]any{"messages": old})
	require.NoError(t, err)
	script, err := os.ReadFile("migrations/012_message_history.sql")
	require.NoError(t, err)
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// The database as it was before: queues held every message.
		if _, err := tx.Exec(ctx, "DROP TABLE message_history"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO message_queues (session_id, owner_id, version, doc) SELECT id, owner_id, 7, $2 FROM sessions WHERE id = $1", id, raw); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, string(script))
		return err
	}))

	q, err := postgres.Queues{}.Get(ctx, pool, id, uuid.Nil)
	require.NoError(t, err)
	assert.Equal(t, []domain.SessionMessage{old[1], old[3]}, q.Messages())
	assert.Equal(t, int64(5), q.NextSequence())
	assert.Equal(t, int64(7), q.Version())
	var moved []domain.SessionMessage
	rows, err := pool.Query(ctx, "SELECT doc FROM message_history WHERE session_id = $1 ORDER BY sequence", id)
	require.NoError(t, err)
	for rows.Next() {
		var doc []byte
		require.NoError(t, rows.Scan(&doc))
		var m domain.SessionMessage
		require.NoError(t, json.Unmarshal(doc, &m))
		moved = append(moved, m)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, []domain.SessionMessage{old[0], old[2], old[4]}, moved)
}

// newSession stores a new session and returns its id and owner.
func newSession(t *testing.T, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}) (uuid.UUID, uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	id, owner := uuid.New(), uuid.New()
	budget, err := domain.NewSessionBudget(domain.Dollars(5), 0)
	require.NoError(t, err)
	s, err := domain.NewAgentSession(domain.NewSessionParams{ID: id, OwnerID: owner, WorkingDirectory: "/work/repo",
		Objective: "Rotate the logs", ModelID: "claude-sonnet-4-5", Budget: budget, Now: time.Now()})
	require.NoError(t, err)
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return postgres.Sessions{}.Add(ctx, tx, s) }))
	return id, owner
}

// enqueueImmediate commits message a, Immediate, to the queue of session
// id while it runs.
func enqueueImmediate(t *testing.T, pool *pgxpool.Pool, id, a uuid.UUID, now time.Time) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, postgres.InTx(ctx, pool, func(tx pgx.Tx) error {
		sq, err := postgres.Queues{}.Load(ctx, tx, id, uuid.Nil)
		if err != nil {
			return err
		}
		if _, err := sq.Queue.Enqueue(a, "first", domain.PriorityImmediate, domain.MessageFromUser, domain.StatusRunning, now); err != nil {
			return err
		}
		return postgres.Queues{}.Save(ctx, tx, sq.Queue)
	}))
}

// TestQueueWritesWaitForTheCommitRoundTrip: in a DeferredOutboxTx, a
// queue's save sends nothing until Flush, which sends its update, the
// moves to the history and the outbox in one round trip; a save of a queue
// that changed since it was loaded fails there with a version conflict,
// before anything else of the round trip counts.
func TestQueueWritesWaitForTheCommitRoundTrip(t *testing.T) {
	ctx := context.Background()
	pool := testenv.Postgres(t)
	id, _ := newSession(t, pool)
	a := uuid.New()
	now := time.Now().UTC()
	enqueueImmediate(t, pool, id, a, now)
	version := func(q postgres.Querier) (v int64) {
		require.NoError(t, q.QueryRow(ctx, "SELECT version FROM message_queues WHERE session_id = $1", id).Scan(&v))
		return v
	}
	history := func(q postgres.Querier) (n int) {
		require.NoError(t, q.QueryRow(ctx, "SELECT count(*) FROM message_history WHERE session_id = $1", id).Scan(&n))
		return n
	}

	deliver := func(tx *postgres.DeferredOutboxTx) error {
		sq, err := postgres.Queues{}.Load(ctx, tx, id, a)
		if err != nil {
			return err
		}
		if err := sq.Queue.MarkDelivered(a, now); err != nil {
			return err
		}
		return postgres.Queues{}.Save(ctx, tx, sq.Queue)
	}
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		d := postgres.DeferOutbox(tx)
		require.NoError(t, deliver(d))
		assert.Equal(t, int64(1), version(tx), "the update waits for Flush")
		assert.Equal(t, 0, history(tx), "the move to the history waits for Flush")
		assert.Len(t, d.Pending(), 1, "its event waits for Flush")
		require.NoError(t, d.Flush(ctx, &pgx.Batch{}))
		assert.Equal(t, int64(2), version(tx))
		assert.Equal(t, 1, history(tx))
		return nil
	}))

	// A stale save: loaded at version 2, updated by another transaction
	// before it is saved.
	conflict := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		d := postgres.DeferOutbox(tx)
		sq, err := postgres.Queues{}.Load(ctx, d, id, uuid.Nil)
		if err != nil {
			return err
		}
		if _, err := sq.Queue.Enqueue(uuid.New(), "second", domain.PriorityQueued, domain.MessageFromUser, domain.StatusRunning, now); err != nil {
			return err
		}
		_, err = pool.Exec(ctx, "UPDATE message_queues SET version = version + 1 WHERE session_id = $1", id)
		require.NoError(t, err)
		require.NoError(t, postgres.Queues{}.Save(ctx, d, sq.Queue), "the conflict shows at Flush")
		return d.Flush(ctx, &pgx.Batch{})
	})
	require.ErrorIs(t, conflict, postgres.ErrVersionConflict)
	assert.Equal(t, int64(3), version(pool), "only the other transaction's update")
}

// TestQueueConflictKeepsTheCommitFromRunning: a command's last batch
// carries its COMMIT (InTx, QueueCommit); when the queue changed since it
// was loaded, its update fails in the server, so the COMMIT behind it
// does not run and none of the batch's writes (the move to the history,
// the outbox, the record behind it) stays.
func TestQueueConflictKeepsTheCommitFromRunning(t *testing.T) {
	ctx := context.Background()
	pool := testenv.Postgres(t)
	id, _ := newSession(t, pool)
	a := uuid.New()
	now := time.Now().UTC()
	enqueueImmediate(t, pool, id, a, now)
	count := func(sql string) (n int) {
		require.NoError(t, pool.QueryRow(ctx, sql, id).Scan(&n))
		return n
	}
	outboxBefore := count("SELECT count(*) FROM outbox WHERE aggregate_id = $1")

	deliver := func(stale bool) error {
		return postgres.InTx(ctx, pool, func(tx pgx.Tx) error {
			d := postgres.DeferOutbox(tx)
			sq, err := postgres.Queues{}.Load(ctx, d, id, a)
			if err != nil {
				return err
			}
			if err := sq.Queue.MarkDelivered(a, now); err != nil {
				return err
			}
			if stale {
				_, err := pool.Exec(ctx, "UPDATE message_queues SET version = version + 1 WHERE session_id = $1", id)
				require.NoError(t, err)
			}
			if err := (postgres.Queues{}).Save(ctx, d, sq.Queue); err != nil {
				return err
			}
			last := &pgx.Batch{}
			last.Queue("INSERT INTO processed_messages (consumer, message_id, result) VALUES ('probe', $1, '{}')", id.String())
			postgres.QueueCommit(last)
			return d.Flush(ctx, last)
		})
	}
	require.ErrorIs(t, deliver(true), postgres.ErrVersionConflict)
	assert.Equal(t, 0, count("SELECT count(*) FROM message_history WHERE session_id = $1"), "no move to the history")
	assert.Equal(t, outboxBefore, count("SELECT count(*) FROM outbox WHERE aggregate_id = $1"), "no event")
	assert.Equal(t, 0, count("SELECT count(*) FROM processed_messages WHERE message_id = $1::text"), "no record")

	require.NoError(t, deliver(false), "loaded afresh, the same change commits")
	assert.Equal(t, 1, count("SELECT count(*) FROM message_history WHERE session_id = $1"))
	assert.Equal(t, outboxBefore+1, count("SELECT count(*) FROM outbox WHERE aggregate_id = $1"))
	assert.Equal(t, 1, count("SELECT count(*) FROM processed_messages WHERE message_id = $1::text"))
}
