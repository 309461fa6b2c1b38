// Package postgres keeps agentbus's system of record: the aggregates, the
// read models, the transactional outbox and the record of processed
// messages that makes every consumer idempotent.
package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentbus/agentbus/bus/outbox"
)

// OutboxMessage is one event written in an aggregate's transaction and
// published to JetStream after the commit.
type OutboxMessage struct {
	// ID is the event id; it becomes the Nats-Msg-Id, so a republished
	// row is dropped by JetStream's duplicate window.
	ID uuid.UUID
	// Subject is agents.evt.<aggregate>.<aggregateId>.<event>.
	Subject     string
	Aggregate   string
	AggregateID uuid.UUID
	// Type is the event's snake_case name, sent as the Agents-Type header.
	Type string
	// Payload is the JSON envelope published as the message body.
	Payload []byte
}

// WriteOutbox appends messages to the outbox inside tx, in order. In a
// DeferredOutboxTx they wait for its Flush.
func WriteOutbox(ctx context.Context, tx pgx.Tx, msgs []OutboxMessage) error {
	if len(msgs) == 0 {
		return nil
	}
	if d, ok := tx.(*DeferredOutboxTx); ok {
		d.pending = append(d.pending, msgs...)
		return nil
	}
	if _, err := tx.Exec(ctx, outboxInsert, outboxArgs(msgs)...); err != nil {
		return fmt.Errorf("write outbox: %w", err)
	}
	return nil
}

// DeferredOutboxTx is a transaction whose outbox writes, and the writes a
// repository defers to it (Defer), wait for Flush, which sends them in one
// round trip with the transaction's last statements: a command's
// transaction is then shorter by a round trip for each.
type DeferredOutboxTx struct {
	pgx.Tx
	writes  pgx.Batch
	pending []OutboxMessage
	written []OutboxMessage
}

// Pending returns the outbox messages held for Flush.
func (d *DeferredOutboxTx) Pending() []OutboxMessage { return d.pending }

// Written returns the outbox messages Flush wrote, in order: once the
// transaction commits, the writer may forward them itself.
func (d *DeferredOutboxTx) Written() []OutboxMessage { return d.written }

// DeferOutbox wraps tx so that its outbox writes wait for Flush.
func DeferOutbox(tx pgx.Tx) *DeferredOutboxTx { return &DeferredOutboxTx{Tx: tx} }

// Defer holds a write for Flush, which runs the held writes in the order
// they were deferred, before the outbox messages, and fails with the first
// error of a write or of its check (which may be nil). Only a write that
// nothing in the transaction reads back may wait.
func (d *DeferredOutboxTx) Defer(sql string, args []any, check func(pgconn.CommandTag) error) {
	q := d.writes.Queue(sql, args...)
	if check != nil {
		q.Exec(check)
	}
}

// Flush runs the held writes, writes the outbox messages held so far, then
// runs last, all in one round trip.
func (d *DeferredOutboxTx) Flush(ctx context.Context, last *pgx.Batch) error {
	b := &pgx.Batch{QueuedQueries: d.writes.QueuedQueries}
	d.writes = pgx.Batch{}
	if len(d.pending) > 0 {
		b.Queue(outboxInsert, outboxArgs(d.pending)...)
		d.written = append(d.written, d.pending...)
		d.pending = nil
	}
	b.QueuedQueries = append(b.QueuedQueries, last.QueuedQueries...)
	// Close runs the checks and fails with the first error.
	return versionConflictFrom(d.Tx.SendBatch(ctx, b).Close())
}

// execOrDefer runs a write in tx, or holds it for Flush when tx is a
// DeferredOutboxTx; check, when not nil, judges its result either way.
func execOrDefer(ctx context.Context, tx pgx.Tx, sql string, args []any, check func(pgconn.CommandTag) error) error {
	if d, ok := tx.(*DeferredOutboxTx); ok {
		d.Defer(sql, args, check)
		return nil
	}
	tag, err := tx.Exec(ctx, sql, args...)
	if err == nil && check != nil {
		err = check(tag)
	}
	return err
}

// outboxInsert is one multi-row insert; WITH ORDINALITY keeps the
// positions in the order the events were raised.
const outboxInsert = `
	INSERT INTO outbox (id, subject, aggregate, aggregate_id, type, payload)
	SELECT id, subject, aggregate, aggregate_id, type, payload::jsonb
	FROM unnest($1::uuid[], $2::text[], $3::text[], $4::uuid[], $5::text[], $6::text[])
	     WITH ORDINALITY AS m(id, subject, aggregate, aggregate_id, type, payload, n)
	ORDER BY n`

func outboxArgs(msgs []OutboxMessage) []any {
	ids := make([]uuid.UUID, len(msgs))
	subjects := make([]string, len(msgs))
	aggregates := make([]string, len(msgs))
	aggregateIDs := make([]uuid.UUID, len(msgs))
	types := make([]string, len(msgs))
	payloads := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i], subjects[i], aggregates[i], aggregateIDs[i], types[i], payloads[i] =
			m.ID, m.Subject, m.Aggregate, m.AggregateID, m.Type, string(m.Payload)
	}
	return []any{ids, subjects, aggregates, aggregateIDs, types, payloads}
}

// Outbox reads and forgets committed outbox rows for an outbox.Forwarder.
type Outbox struct {
	pool *pgxpool.Pool
}

// NewOutbox returns the outbox stored in pool.
func NewOutbox(pool *pgxpool.Pool) *Outbox { return &Outbox{pool: pool} }

// outboxLockKey is the advisory lock that elects the sweeping forwarder.
const outboxLockKey = 0x6167656e74627573 // "agentbus"

// TryLead takes the session-level advisory lock that elects the one
// sweeping forwarder and listens for the writers' notifications on the
// same connection.
func (o *Outbox) TryLead(ctx context.Context) (outbox.Lease, bool, error) {
	conn, err := o.pool.Acquire(ctx)
	if err != nil {
		return nil, false, err
	}
	// The lock and LISTEN belong to this connection: hijack it so that it
	// is closed, not returned to the pool, when the lease ends.
	pc := conn.Hijack()
	var locked bool
	if err := pc.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", int64(outboxLockKey)).Scan(&locked); err != nil || !locked {
		_ = pc.Close(context.Background())
		return nil, false, err
	}
	if _, err := pc.Exec(ctx, "LISTEN outbox"); err != nil {
		_ = pc.Close(context.Background())
		return nil, false, err
	}
	return outboxLease{pc}, true, nil
}

type outboxLease struct{ conn *pgx.Conn }

func (l outboxLease) Wait(ctx context.Context) error {
	_, err := l.conn.WaitForNotification(ctx)
	return err
}

func (l outboxLease) Release() { _ = l.conn.Close(context.Background()) }

// Committed returns up to limit committed rows in position order. Every
// row committed so far is visible, whatever other transactions are still
// running: nothing waits on an unrelated transaction. That keeps each
// aggregate's order, because the writers of one aggregate are serialised
// by its version check: a transaction can only write an aggregate's next
// events once the one that wrote the previous ones committed, so its rows
// come later in position order and are never visible without them. Rows
// of different aggregates may be published in another order than their
// positions; nothing orders them. Nothing is skipped either: the forwarder
// keeps no cursor, every row stays until it is published and forgotten.
func (o *Outbox) Committed(ctx context.Context, limit int) ([]outbox.Message, error) {
	rows, err := o.pool.Query(ctx, `
		SELECT id, subject, type, payload::text
		FROM outbox
		ORDER BY position
		LIMIT $1`, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var msgs []outbox.Message
	for rows.Next() {
		var m outbox.Message
		var payload string
		if err := rows.Scan(&m.ID, &m.Subject, &m.Type, &payload); err != nil {
			return nil, err
		}
		m.Payload = []byte(payload)
		msgs = append(msgs, m)
	}
	return msgs, rows.Err()
}

// Forget deletes published rows without waiting for the commit to reach
// the disk: a delete lost in a crash only publishes its rows again, which
// JetStream drops as duplicates, so it need not cost an fsync of its own.
// Both statements go in one round trip, as one transaction; the simple
// protocol that allows that takes no parameters, so the ids (uuids only)
// are written into the statement.
func (o *Outbox) Forget(ctx context.Context, ids []uuid.UUID) error {
	var sql strings.Builder
	sql.WriteString("SET LOCAL synchronous_commit = off; DELETE FROM outbox WHERE id = ANY('{")
	for i, id := range ids {
		if i > 0 {
			sql.WriteByte(',')
		}
		sql.WriteString(id.String())
	}
	sql.WriteString("}'::uuid[])")
	_, err := o.pool.Exec(ctx, sql.String())
	return err
}

// Message returns m as the forwarder publishes it.
func (m OutboxMessage) Message() outbox.Message {
	return outbox.Message{ID: m.ID, Subject: m.Subject, Type: m.Type, Payload: m.Payload}
}

// NotifyOutbox wakes the outbox forwarder. Call it after the commit of a
// transaction that wrote to the outbox, not inside it: Postgres holds a
// lock on its notification queue from a NOTIFY until the end of the
// transaction, fsync of the commit included, so a NOTIFY in every writing
// transaction would make their commits wait for each other. Sent on its
// own, the notification does not wait for its commit to be flushed; one
// lost in a crash only delays publication until the publisher's next poll.
func NotifyOutbox(ctx context.Context, db Execer) error {
	_, err := db.Exec(ctx, "SET LOCAL synchronous_commit = off; SELECT pg_notify('outbox', '')")
	return err
}

// Execer is what both a pool and a transaction offer for writing.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}
