package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus/bustest"
	"github.com/agentbus/agentbus/bus/outbox"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/postgres"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func outboxMsg(aggregateID uuid.UUID, n int) postgres.OutboxMessage {
	id := uuid.New()
	payload, _ := json.Marshal(map[string]any{"id": id, "n": n})
	return postgres.OutboxMessage{
		ID:          id,
		Subject:     fmt.Sprintf("agents.evt.session.%s.session_output_recorded", aggregateID),
		Aggregate:   "session",
		AggregateID: aggregateID,
		Type:        "session_output_recorded",
		Payload:     payload,
	}
}

func writeInTx(t *testing.T, pool *pgxpool.Pool, msgs ...postgres.OutboxMessage) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return postgres.WriteOutbox(ctx, tx, msgs)
	}))
}

// published reads every message of AGENTS_EVENTS and returns the n field
// of each body in stream order.
func published(t *testing.T, js jetstream.JetStream) []int {
	t.Helper()
	ctx := context.Background()
	stream, err := js.Stream(ctx, "AGENTS_EVENTS")
	require.NoError(t, err)
	info, err := stream.Info(ctx)
	require.NoError(t, err)
	var ns []int
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		require.NoError(t, err)
		var body struct{ N int }
		require.NoError(t, json.Unmarshal(m.Data, &body))
		ns = append(ns, body.N)
	}
	return ns
}

func outboxCount(t *testing.T, pool *pgxpool.Pool) int {
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM outbox").Scan(&n))
	return n
}

func TestOutboxPublishesInPositionOrderAndEmpties(t *testing.T) {
	pool := testenv.Postgres(t)
	_, js, _ := bustest.Server(t)
	agg := uuid.New()
	writeInTx(t, pool, outboxMsg(agg, 1), outboxMsg(agg, 2))
	writeInTx(t, pool, outboxMsg(agg, 3))

	pub := forwarder(t, pool, js)
	n, err := pub.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	assert.Equal(t, []int{1, 2, 3}, published(t, js))
	assert.Zero(t, outboxCount(t, pool))
}

func TestOutboxMessageCarriesIdAndTypeHeaders(t *testing.T) {
	pool := testenv.Postgres(t)
	_, js, _ := bustest.Server(t)
	msg := outboxMsg(uuid.New(), 1)
	writeInTx(t, pool, msg)
	_, err := forwarder(t, pool, js).Sweep(context.Background())
	require.NoError(t, err)

	stream, err := js.Stream(context.Background(), "AGENTS_EVENTS")
	require.NoError(t, err)
	got, err := stream.GetLastMsgForSubject(context.Background(), msg.Subject)
	require.NoError(t, err)
	assert.Equal(t, msg.ID.String(), got.Header.Get(jetstream.MsgIDHeader))
	assert.Equal(t, "session_output_recorded", got.Header.Get("Agents-Type"))
}

// TestOutboxNotMissingMessages interleaves transactions that commit out of
// order and one that rolls back: the forwarder misses none, invents none,
// and keeps each aggregate's events in commit order.
func TestOutboxNotMissingMessages(t *testing.T) {
	ctx := context.Background()
	pool := testenv.Postgres(t)
	_, js, _ := bustest.Server(t)
	pub := forwarder(t, pool, js)
	agg := uuid.New()

	slow, err := pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, postgres.WriteOutbox(ctx, slow, []postgres.OutboxMessage{outboxMsg(agg, 1)}))

	rolledBack, err := pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, postgres.WriteOutbox(ctx, rolledBack, []postgres.OutboxMessage{outboxMsg(agg, 99)}))

	writeInTx(t, pool, outboxMsg(uuid.New(), 2)) // commits first, with a higher position

	n, err := pub.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "a committed row does not wait for the transactions still running")

	require.NoError(t, rolledBack.Rollback(ctx))
	require.NoError(t, slow.Commit(ctx))
	writeInTx(t, pool, outboxMsg(agg, 3))

	for {
		n, err := pub.Sweep(ctx)
		require.NoError(t, err)
		if n == 0 {
			break
		}
	}
	assert.Equal(t, []int{2, 1, 3}, published(t, js), "each aggregate's rows in commit order")
	assert.Zero(t, outboxCount(t, pool))
}

// TestOutboxDoesNotWaitForAnOpenTransaction: an event committed while
// another write transaction stays open on the server is published by the
// next sweep, before that transaction ends.
func TestOutboxDoesNotWaitForAnOpenTransaction(t *testing.T) {
	ctx := context.Background()
	pool := testenv.Postgres(t)
	_, js, _ := bustest.Server(t)

	held, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = held.Rollback(ctx) }()
	// A write of its own gives the transaction an id, as a projection's
	// or an idempotency row's transaction has.
	_, err = held.Exec(ctx, "CREATE TEMP TABLE held (n int); INSERT INTO held VALUES (1)")
	require.NoError(t, err)

	writeInTx(t, pool, outboxMsg(uuid.New(), 1))
	n, err := forwarder(t, pool, js).Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, []int{1}, published(t, js))
	assert.Zero(t, outboxCount(t, pool))
}

// TestOutboxRepublishAfterCrashIsDroppedAsDuplicate covers a publisher that
// dies after JetStream acknowledged a row and before deleting it.
func TestOutboxRepublishAfterCrashIsDroppedAsDuplicate(t *testing.T) {
	ctx := context.Background()
	pool := testenv.Postgres(t)
	_, js, _ := bustest.Server(t)
	msg := outboxMsg(uuid.New(), 7)
	writeInTx(t, pool, msg)

	// The first publisher got as far as JetStream's ack, then died.
	_, err := js.PublishMsg(ctx, &nats.Msg{Subject: msg.Subject, Data: msg.Payload,
		Header: nats.Header{jetstream.MsgIDHeader: []string{msg.ID.String()}}})
	require.NoError(t, err)

	n, err := forwarder(t, pool, js).Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, []int{7}, published(t, js), "the event is on the stream exactly once")
	assert.Zero(t, outboxCount(t, pool))
}

func TestOutboxTwoPublishersPublishEachEventOnce(t *testing.T) {
	pool := testenv.Postgres(t)
	_, js, _ := bustest.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 2 {
		pub := forwarder(t, pool, js)
		pub.PollInterval, pub.BatchSize = 50*time.Millisecond, 7
		go func() { _ = pub.Run(ctx) }()
	}
	agg := uuid.New()
	want := make([]int, 0, 200)
	for i := range 200 {
		writeInTx(t, pool, outboxMsg(agg, i))
		want = append(want, i)
	}
	require.Eventually(t, func() bool { return outboxCount(t, pool) == 0 }, 30*time.Second, 20*time.Millisecond)
	assert.Equal(t, want, published(t, js))
}

// TestOutboxPublisherWakesOnNotify: a publisher that would poll only once
// an hour publishes a committed row as soon as NotifyOutbox is called, and
// not before.
func TestOutboxPublisherWakesOnNotify(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool := testenv.Postgres(t)
	_, js, _ := bustest.Server(t)
	pub := forwarder(t, pool, js)
	pub.PollInterval = time.Hour
	done := make(chan struct{})
	go func() { defer close(done); _ = pub.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// The first row goes out in the publisher's first round or on its
	// notification, whichever comes first.
	agg := uuid.New()
	writeInTx(t, pool, outboxMsg(agg, 1))
	require.NoError(t, postgres.NotifyOutbox(ctx, pool))
	require.Eventually(t, func() bool { return outboxCount(t, pool) == 0 }, 30*time.Second, 20*time.Millisecond)
	// Let the publisher take the notification if the first round beat it.
	time.Sleep(time.Second)

	writeInTx(t, pool, outboxMsg(agg, 2))
	// A commit alone wakes nobody (the notification is the writer's to
	// send), so the row waits for the poll an hour away.
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, 1, outboxCount(t, pool), "published without a notification")

	require.NoError(t, postgres.NotifyOutbox(ctx, pool))
	require.Eventually(t, func() bool { return outboxCount(t, pool) == 0 }, 30*time.Second, 20*time.Millisecond)
	assert.Equal(t, []int{1, 2}, published(t, js))
}

// TestOutboxLargeBacklogPublishedInOrderExactlyOnce publishes a backlog of
// 5,000 rows of 50 aggregates, written 100 to a transaction, in atomic
// batches: every row reaches the stream once, in position order.
func TestOutboxLargeBacklogPublishedInOrderExactlyOnce(t *testing.T) {
	ctx := context.Background()
	pool := testenv.Postgres(t)
	_, js, _ := bustest.Server(t)
	aggs := make([]uuid.UUID, 50)
	for i := range aggs {
		aggs[i] = uuid.New()
	}
	const total = 5000
	want := make([]int, 0, total)
	ids := make(map[string]int, total)
	for tx := range total / 100 {
		msgs := make([]postgres.OutboxMessage, 100)
		for i := range msgs {
			n := tx*100 + i
			msgs[i] = outboxMsg(aggs[n%len(aggs)], n)
			ids[msgs[i].ID.String()] = n
			want = append(want, n)
		}
		writeInTx(t, pool, msgs...)
	}

	pub := forwarder(t, pool, js)
	rounds := 0
	for {
		n, err := pub.Sweep(ctx)
		require.NoError(t, err)
		if n == 0 {
			break
		}
		rounds++
	}
	assert.Equal(t, 5, rounds, "a round publishes up to 1000 rows")
	assert.Equal(t, want, published(t, js))
	assert.Zero(t, outboxCount(t, pool))

	stream, err := js.Stream(ctx, "AGENTS_EVENTS")
	require.NoError(t, err)
	info, err := stream.Info(ctx)
	require.NoError(t, err)
	require.EqualValues(t, total, info.State.Msgs)
	seen := map[string]bool{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		require.NoError(t, err)
		id := m.Header.Get(jetstream.MsgIDHeader)
		assert.False(t, seen[id], "message %s stored twice", id)
		seen[id] = true
		var body struct{ N int }
		require.NoError(t, json.Unmarshal(m.Data, &body))
		assert.Equal(t, ids[id], body.N, "message id and body belong together")
	}
	assert.Len(t, seen, total)
}

// TestDeferredOutboxWaitsForFlush: outbox writes in a DeferredOutboxTx are
// held until Flush, which writes them in order with the statements it is
// given; when one of those fails, the transaction keeps none of it.
func TestDeferredOutboxWaitsForFlush(t *testing.T) {
	ctx := context.Background()
	pool := testenv.Postgres(t)
	_, js, _ := bustest.Server(t)
	agg := uuid.New()

	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		d := postgres.DeferOutbox(tx)
		require.NoError(t, postgres.WriteOutbox(ctx, d, []postgres.OutboxMessage{outboxMsg(agg, 1)}))
		require.NoError(t, postgres.WriteOutbox(ctx, d, []postgres.OutboxMessage{outboxMsg(agg, 2), outboxMsg(agg, 3)}))
		var held int
		require.NoError(t, tx.QueryRow(ctx, "SELECT count(*) FROM outbox").Scan(&held))
		assert.Zero(t, held, "written before Flush")
		last := &pgx.Batch{}
		require.NoError(t, postgres.QueueMarkProcessed(last, "test", "message-1", map[string]int{"n": 3}))
		return d.Flush(ctx, last)
	}))
	_, err := forwarder(t, pool, js).Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2, 3}, published(t, js))
	r, ok, err := postgres.ProcessedResult[map[string]int](ctx, pool, "test", "message-1")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 3, r["n"])

	// The same message id again: the record fails, and the events with it.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		d := postgres.DeferOutbox(tx)
		require.NoError(t, postgres.WriteOutbox(ctx, d, []postgres.OutboxMessage{outboxMsg(agg, 4)}))
		last := &pgx.Batch{}
		require.NoError(t, postgres.QueueMarkProcessed(last, "test", "message-1", nil))
		return d.Flush(ctx, last)
	})
	assert.True(t, postgres.IsUniqueViolation(err), "got %v", err)
	assert.Zero(t, outboxCount(t, pool))
}

// countingOutbox is the outbox of Postgres counting its deletes.
type countingOutbox struct {
	*postgres.Outbox
	forgets atomic.Int64
}

func (c *countingOutbox) Forget(ctx context.Context, ids []uuid.UUID) error {
	c.forgets.Add(1)
	return c.Outbox.Forget(ctx, ids)
}

// TestOutboxForwardedRowsForgottenTogether: the rows of events forwarded
// one command at a time are deleted together, not one delete each.
func TestOutboxForwardedRowsForgottenTogether(t *testing.T) {
	ctx := context.Background()
	pool := testenv.Postgres(t)
	_, js, _ := bustest.Server(t)
	source := &countingOutbox{Outbox: postgres.NewOutbox(pool)}
	f, err := outbox.New(source, js)
	require.NoError(t, err)
	f.ForgetDelay = 500 * time.Millisecond

	const forwards = 20
	agg := uuid.New()
	for i := range forwards {
		m := outboxMsg(agg, i)
		writeInTx(t, pool, m)
		require.NoError(t, f.Forward(ctx, []outbox.Message{m.Message()}))
	}
	require.Eventually(t, func() bool { return outboxCount(t, pool) == 0 },
		30*time.Second, 10*time.Millisecond, "forwarded rows are forgotten")
	assert.Equal(t, seq(0, forwards), published(t, js))
	assert.Less(t, source.forgets.Load(), int64(forwards/2), "deletes for %d forwards", forwards)
}

// TestOutboxSweepForgetsForwardedRowsFirst: a sweep deletes the rows its
// forwarder already published before it reads the outbox, instead of
// publishing them again.
func TestOutboxSweepForgetsForwardedRowsFirst(t *testing.T) {
	ctx := context.Background()
	pool := testenv.Postgres(t)
	_, js, _ := bustest.Server(t)
	f := forwarder(t, pool, js)
	f.ForgetDelay = time.Hour

	agg := uuid.New()
	forwarded := []postgres.OutboxMessage{outboxMsg(agg, 1), outboxMsg(agg, 2)}
	writeInTx(t, pool, forwarded...)
	require.NoError(t, f.Forward(ctx, []outbox.Message{forwarded[0].Message(), forwarded[1].Message()}))
	require.Equal(t, 2, outboxCount(t, pool), "forgotten later")
	writeInTx(t, pool, outboxMsg(agg, 3))

	n, err := f.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "published by the sweep")
	assert.Zero(t, outboxCount(t, pool))
	assert.Equal(t, []int{1, 2, 3}, published(t, js))
}

// forwarder returns an outbox forwarder of pool's outbox publishing to js.
func forwarder(t testing.TB, pool *pgxpool.Pool, js jetstream.JetStream) *outbox.Forwarder {
	f, err := outbox.New(postgres.NewOutbox(pool), js)
	require.NoError(t, err)
	return f
}
