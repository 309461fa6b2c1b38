// Package postgres keeps agentbus's system of record: the aggregates, the
// read models, the transactional outbox and the record of processed
// messages that makes every consumer idempotent.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
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

// DeferredOutboxTx is a transaction whose outbox writes wait for Flush,
// which sends them in one round trip with the transaction's last
// statements: a command's transaction is then one round trip shorter.
type DeferredOutboxTx struct {
	pgx.Tx
	pending []OutboxMessage
}

// DeferOutbox wraps tx so that its outbox writes wait for Flush.
func DeferOutbox(tx pgx.Tx) *DeferredOutboxTx { return &DeferredOutboxTx{Tx: tx} }

// Flush writes the outbox messages held so far, then runs last, all in one
// round trip.
func (d *DeferredOutboxTx) Flush(ctx context.Context, last *pgx.Batch) error {
	b := &pgx.Batch{}
	if len(d.pending) > 0 {
		b.Queue(outboxInsert, outboxArgs(d.pending)...)
		d.pending = nil
	}
	b.QueuedQueries = append(b.QueuedQueries, last.QueuedQueries...)
	return d.Tx.SendBatch(ctx, b).Close()
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

// OutboxPublisher moves committed outbox rows onto JetStream.
//
// Several copies may run: one holds a session-level advisory lock and
// publishes, the others wait to take over. A single active publisher that
// publishes each round in position order, and the next round only once the
// previous one is stored, keeps each aggregate's events in commit order.
type OutboxPublisher struct {
	// Pool is the database holding the outbox.
	Pool *pgxpool.Pool
	// JS is the JetStream connection the default Publisher publishes
	// through.
	JS jetstream.JetStream
	// Publisher publishes each round's rows: a run of rows goes out as one
	// atomic batch, stored with one fsync. Nil means bus.NewPublisher(JS)
	// with its defaults.
	Publisher *bus.Publisher
	// BatchSize is how many rows one round reads and publishes at most
	// (default 1000, one atomic batch of the default Publisher).
	BatchSize int
	// PollInterval is how often the outbox is read when no notification
	// arrives (default 1s).
	PollInterval time.Duration
	// Log receives progress and errors (default slog.Default()).
	Log *slog.Logger

	once    sync.Once
	initErr error
}

// outboxLockKey is the advisory lock that elects the active publisher.
const outboxLockKey = 0x6167656e74627573 // "agentbus"

// setDefaults fills in the defaults once, however many rounds run.
func (p *OutboxPublisher) setDefaults() error {
	p.once.Do(func() {
		if p.BatchSize <= 0 {
			p.BatchSize = 1000
		}
		if p.PollInterval <= 0 {
			p.PollInterval = time.Second
		}
		if p.Log == nil {
			p.Log = slog.Default()
		}
		p.Log = p.Log.With("component", "outbox")
		if p.Publisher == nil {
			p.Publisher, p.initErr = bus.NewPublisher(p.JS, bus.PublisherConfig{Logger: p.Log})
		}
	})
	return p.initErr
}

// Run publishes until ctx ends. Errors are logged and retried.
func (p *OutboxPublisher) Run(ctx context.Context) error {
	if err := p.setDefaults(); err != nil {
		return err
	}
	for ctx.Err() == nil {
		err := p.lead(ctx)
		if err != nil && ctx.Err() == nil {
			p.Log.Warn("outbox publisher restarting", "error", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(p.PollInterval):
		}
	}
	return nil
}

// lead waits to hold the publisher lock, then publishes until an error.
func (p *OutboxPublisher) lead(ctx context.Context) error {
	conn, err := p.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The lock and LISTEN belong to this connection: hijack it so that it
	// is closed, not returned to the pool, when we stop leading.
	pc := conn.Hijack()
	defer pc.Close(context.Background())

	for {
		var locked bool
		if err := pc.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", int64(outboxLockKey)).Scan(&locked); err != nil {
			return err
		}
		if locked {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(p.PollInterval):
		}
	}
	if _, err := pc.Exec(ctx, "LISTEN outbox"); err != nil {
		return err
	}
	p.Log.Info("outbox publisher leading")
	for {
		for {
			n, err := p.PublishPending(ctx)
			if err != nil {
				return err
			}
			if n < p.BatchSize {
				break
			}
		}
		wait, cancel := context.WithTimeout(ctx, p.PollInterval)
		_, err := pc.WaitForNotification(wait)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
	}
}

// PublishPending publishes one round of committed rows, in position order,
// and deletes them once JetStream stored every one. Only rows of
// transactions older than every transaction still running are read
// (pg_snapshot_xmin), so a row that commits late, behind rows with higher
// positions, is picked up in a later round instead of skipped.
func (p *OutboxPublisher) PublishPending(ctx context.Context) (int, error) {
	if err := p.setDefaults(); err != nil {
		return 0, err
	}
	rows, err := p.Pool.Query(ctx, `
		SELECT position, id, subject, type, payload::text
		FROM outbox
		WHERE txid < pg_snapshot_xmin(pg_current_snapshot())
		ORDER BY position
		LIMIT $1`, p.BatchSize)
	if err != nil {
		return 0, err
	}
	var (
		positions []int64
		msgs      []*nats.Msg
	)
	for rows.Next() {
		var position int64
		var id uuid.UUID
		var subject, typ, payload string
		if err := rows.Scan(&position, &id, &subject, &typ, &payload); err != nil {
			rows.Close()
			return 0, err
		}
		m := &nats.Msg{Subject: subject, Data: []byte(payload), Header: nats.Header{}}
		m.Header.Set(jetstream.MsgIDHeader, id.String())
		m.Header.Set("Agents-Type", typ)
		positions = append(positions, position)
		msgs = append(msgs, m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(msgs) == 0 {
		return 0, nil
	}
	// PublishMsgs returns once every message is stored. On a failure
	// nothing is deleted and the whole round is published again, which
	// the Nats-Msg-Id makes harmless: a batch holding a stored message is
	// refused and resent one by one, and the duplicates are dropped.
	if err := p.Publisher.PublishMsgs(ctx, msgs); err != nil {
		return 0, fmt.Errorf("publish outbox: %w", err)
	}
	if err := p.forget(ctx, positions); err != nil {
		return 0, err
	}
	return len(msgs), nil
}

// forget deletes published rows without waiting for the commit to reach
// the disk: a delete lost in a crash only publishes its rows again, which
// JetStream drops as duplicates, so it need not cost an fsync of its own.
// Both statements go in one round trip, as one transaction; the simple
// protocol that allows that takes no parameters, so the positions (numbers
// only) are written into the statement.
func (p *OutboxPublisher) forget(ctx context.Context, positions []int64) error {
	var sql strings.Builder
	sql.WriteString("SET LOCAL synchronous_commit = off; DELETE FROM outbox WHERE position = ANY('{")
	for i, pos := range positions {
		if i > 0 {
			sql.WriteByte(',')
		}
		sql.WriteString(strconv.FormatInt(pos, 10))
	}
	sql.WriteString("}'::bigint[])")
	_, err := p.Pool.Exec(ctx, sql.String())
	return err
}

// NotifyOutbox wakes the outbox publisher. Call it after the commit of a
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
