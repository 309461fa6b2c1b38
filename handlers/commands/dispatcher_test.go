package commands_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
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

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
	"github.com/agentbus/agentbus/bus/outbox"
	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/handlers/commands"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/postgres"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var errTooBig = errors.New("counter would pass its limit")

// A counter is the smallest aggregate: a value with an optimistic version.
// increment loads it, changes it and saves it with a version check, as the
// real handlers do.
func increment(calls *atomic.Int64) commands.Handler {
	return func(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
		calls.Add(1)
		var value, version int
		if err := tx.QueryRow(ctx, "SELECT value, version FROM counters WHERE id = $1", cmd.AggregateID).Scan(&value, &version); err != nil {
			return nil, err
		}
		if value >= 1000 {
			return nil, errTooBig
		}
		tag, err := tx.Exec(ctx, "UPDATE counters SET value = $2, version = version + 1 WHERE id = $1 AND version = $3",
			cmd.AggregateID, value+1, version)
		if err != nil {
			return nil, err
		}
		if tag.RowsAffected() == 0 {
			return nil, postgres.ErrVersionConflict
		}
		return map[string]int{"value": value + 1}, nil
	}
}

func classify(err error) *command.Error {
	if errors.Is(err, errTooBig) {
		return &command.Error{Kind: command.KindConflict, Message: err.Error(), CurrentStatus: "Full"}
	}
	return nil
}

type harness struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	pool   *pgxpool.Pool
	client *command.Client
	calls  *atomic.Int64
}

func start(t *testing.T, copies int) harness {
	t.Helper()
	pool := testenv.Postgres(t)
	_, err := pool.Exec(context.Background(), "CREATE TABLE counters (id uuid PRIMARY KEY, value int NOT NULL, version int NOT NULL)")
	require.NoError(t, err)
	srv, js, nc := bustest.Server(t)
	calls := &atomic.Int64{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range copies {
		wnc, wjs := bustest.Connect(t, srv)
		d := commands.NewDispatcher(pool, wnc, classify)
		d.Register("counter", "increment", increment(calls))
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = bus.Run(ctx, wjs, bus.RunnerConfig{Stream: bus.StreamCommands, Consumer: commands.Consumer,
				Handler: d.Handle, Concurrency: 8})
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	client, err := command.NewClient(nc, js, commands.Results{Pool: pool})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	return harness{nc: nc, js: js, pool: pool, client: client, calls: calls}
}

func (h harness) newCounter(t *testing.T, value int) uuid.UUID {
	id := uuid.New()
	_, err := h.pool.Exec(context.Background(), "INSERT INTO counters VALUES ($1, $2, 0)", id, value)
	require.NoError(t, err)
	return id
}

func (h harness) value(t *testing.T, id uuid.UUID) int {
	var v int
	require.NoError(t, h.pool.QueryRow(context.Background(), "SELECT value FROM counters WHERE id = $1", id).Scan(&v))
	return v
}

func incrementCmd(t *testing.T, id uuid.UUID) command.Command {
	cmd, err := command.New("counter", "increment", id, "user-1", struct{}{})
	require.NoError(t, err)
	return cmd
}

func do(t *testing.T, h harness, cmd command.Command) command.Result {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := h.client.Do(ctx, cmd)
	require.NoError(t, err)
	return r
}

func TestCommandSucceedsAndReturnsState(t *testing.T) {
	h := start(t, 1)
	id := h.newCounter(t, 0)
	r := do(t, h, incrementCmd(t, id))
	require.NoError(t, r.Err())
	assert.JSONEq(t, `{"value":1}`, string(r.State))
	assert.Equal(t, 1, h.value(t, id))
}

func TestRefusedCommandIsFinalAndNotRetried(t *testing.T) {
	h := start(t, 1)
	id := h.newCounter(t, 1000)
	r := do(t, h, incrementCmd(t, id))
	e, ok := command.AsError(r.Err())
	require.True(t, ok)
	assert.Equal(t, command.KindConflict, e.Kind)
	assert.Equal(t, "Full", e.CurrentStatus)
	assert.EqualValues(t, 1, h.calls.Load(), "a domain refusal is not retried")
}

func TestUnknownCommandIsRefused(t *testing.T) {
	h := start(t, 1)
	cmd, err := command.New("counter", "explode", uuid.New(), "user-1", nil)
	require.NoError(t, err)
	e, ok := command.AsError(do(t, h, cmd).Err())
	require.True(t, ok)
	assert.Equal(t, command.KindValidation, e.Kind)
	assert.Contains(t, e.Message, "counter.explode")
}

func TestRepeatedCommandChangesNothingAndReturnsFirstResult(t *testing.T) {
	h := start(t, 1)
	id := h.newCounter(t, 0)
	cmd := incrementCmd(t, id)
	first := do(t, h, cmd)
	second := do(t, h, cmd)
	assert.Equal(t, first, second)
	assert.Equal(t, 1, h.value(t, id))

	// A repeat that JetStream no longer drops (its duplicate window has
	// passed) reaches the worker, which answers from the stored result:
	// whatever the repeat's run did is rolled back.
	body, err := json.Marshal(cmd)
	require.NoError(t, err)
	reply := nats.NewInbox()
	sub, err := h.nc.SubscribeSync(reply)
	require.NoError(t, err)
	msg := &nats.Msg{Subject: cmd.Subject(), Data: body, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, "late-repeat-"+cmd.ID.String())
	msg.Header.Set(command.ReplyHeader, reply)
	_, err = h.js.PublishMsg(context.Background(), msg)
	require.NoError(t, err)
	answer, err := sub.NextMsg(30 * time.Second)
	require.NoError(t, err)
	var third command.Result
	require.NoError(t, json.Unmarshal(answer.Data, &third))
	assert.Equal(t, first, third)
	assert.Equal(t, 1, h.value(t, id))

}

func TestSendWithoutWaitingLosesNothing(t *testing.T) {
	h := start(t, 1)
	id := h.newCounter(t, 0)
	for range 20 {
		require.NoError(t, h.client.Send(context.Background(), incrementCmd(t, id)))
	}
	require.Eventually(t, func() bool { return h.value(t, id) == 20 }, 30*time.Second, 20*time.Millisecond)
}

// TestConcurrentCommandsAllApplied is the race of "10 commands -> all
// processed": concurrent commands on one aggregate, and on many, are each
// applied exactly once with no lost update.
func TestConcurrentCommandsAllApplied(t *testing.T) {
	h := start(t, 2)
	hot := h.newCounter(t, 0)
	many := make([]uuid.UUID, 50)
	for i := range many {
		many[i] = h.newCounter(t, 0)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	send := func(id uuid.UUID) {
		defer wg.Done()
		r := do(t, h, incrementCmd(t, id))
		if r.Err() != nil {
			errs <- r.Err()
		}
	}
	for range 100 {
		wg.Add(1)
		go send(hot)
	}
	for _, id := range many {
		for range 10 {
			wg.Add(1)
			go send(id)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assert.Equal(t, 100, h.value(t, hot))
	for i, id := range many {
		assert.Equal(t, 10, h.value(t, id), "counter %d", i)
	}
	var processed int
	require.NoError(t, h.pool.QueryRow(context.Background(), "SELECT count(*) FROM processed_messages WHERE consumer = $1", commands.Consumer).Scan(&processed))
	assert.Equal(t, 600, processed)
}

// TestCommitWakesTheOutboxPublisher: a worker that does not publish its
// events itself wakes the outbox forwarder's sweep after each commit, so a
// command's events are published at once although the sweep would poll
// only once an hour.
func TestCommitWakesTheOutboxPublisher(t *testing.T) {
	pool := testenv.Postgres(t)
	srv, js, nc := bustest.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })

	wnc, wjs := bustest.Connect(t, srv)
	d := commands.NewDispatcher(pool, wnc, classify)
	d.Register("counter", "announce", func(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
		id := uuid.New()
		return nil, postgres.WriteOutbox(ctx, tx, []postgres.OutboxMessage{{
			ID: id, Subject: "agents.evt.counter." + cmd.AggregateID.String() + ".announced",
			Aggregate: "counter", AggregateID: cmd.AggregateID, Type: "announced",
			Payload: []byte(`{"id":"` + id.String() + `"}`),
		}})
	})
	wg.Go(func() {
		_ = bus.Run(ctx, wjs, bus.RunnerConfig{Stream: bus.StreamCommands, Consumer: commands.Consumer, Handler: d.Handle})
	})
	_, pjs := bustest.Connect(t, srv)
	publisher, err := outbox.New(postgres.NewOutbox(pool), pjs)
	require.NoError(t, err)
	publisher.PollInterval = time.Hour
	wg.Go(func() { _ = publisher.Run(ctx) })
	client, err := command.NewClient(nc, js, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })

	events, err := js.Stream(ctx, "AGENTS_EVENTS")
	require.NoError(t, err)
	// The first event may also go out in the publisher's first round; the
	// next ones only on a notification.
	for n := uint64(1); n <= 3; n++ {
		cmd, err := command.New("counter", "announce", uuid.New(), "user-1", struct{}{})
		require.NoError(t, err)
		r, err := client.Do(ctx, cmd)
		require.NoError(t, err)
		require.NoError(t, r.Err())
		require.Eventually(t, func() bool {
			info, err := events.Info(ctx)
			return err == nil && info.State.Msgs == n
		}, 30*time.Second, 10*time.Millisecond, "event %d published", n)
	}
}

// TestWorkerPublishesItsCommittedEvents: with a forwarder, the worker
// publishes a command's events itself right after the commit, in order,
// with no sweep running at all, and leaves the outbox empty.
func TestWorkerPublishesItsCommittedEvents(t *testing.T) {
	pool := testenv.Postgres(t)
	srv, js, nc := bustest.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })

	wnc, wjs := bustest.Connect(t, srv)
	d := commands.NewDispatcher(pool, wnc, classify)
	forwarder, err := outbox.New(postgres.NewOutbox(pool), wjs)
	require.NoError(t, err)
	d.ForwardEvents(forwarder)
	agg := uuid.New()
	d.Register("counter", "announce", func(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
		var msgs []postgres.OutboxMessage
		for range 2 {
			id := uuid.New()
			msgs = append(msgs, postgres.OutboxMessage{
				ID: id, Subject: "agents.evt.counter." + cmd.AggregateID.String() + ".announced",
				Aggregate: "counter", AggregateID: cmd.AggregateID, Type: "announced",
				Payload: []byte(`{"id":"` + id.String() + `","command":"` + cmd.ID.String() + `"}`),
			})
		}
		return nil, postgres.WriteOutbox(ctx, tx, msgs)
	})
	wg.Go(func() {
		_ = bus.Run(ctx, wjs, bus.RunnerConfig{Stream: bus.StreamCommands, Consumer: commands.Consumer, Handler: d.Handle, Concurrency: 4})
	})
	client, err := command.NewClient(nc, js, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })

	var sent []string
	for range 3 {
		cmd, err := command.New("counter", "announce", agg, "user-1", struct{}{})
		require.NoError(t, err)
		r, err := client.Do(ctx, cmd)
		require.NoError(t, err)
		require.NoError(t, r.Err())
		sent = append(sent, cmd.ID.String(), cmd.ID.String())
	}
	events, err := js.Stream(ctx, "AGENTS_EVENTS")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := events.Info(ctx)
		return err == nil && info.State.Msgs == 6
	}, 30*time.Second, 10*time.Millisecond, "every event published")
	var got []string
	for seq := uint64(1); seq <= 6; seq++ {
		m, err := events.GetMsg(ctx, seq)
		require.NoError(t, err)
		var body struct{ Command string }
		require.NoError(t, json.Unmarshal(m.Data, &body))
		got = append(got, body.Command)
	}
	assert.Equal(t, sent, got, "in commit order")
	require.Eventually(t, func() bool {
		var n int
		return pool.QueryRow(ctx, "SELECT count(*) FROM outbox").Scan(&n) == nil && n == 0
	}, 30*time.Second, 10*time.Millisecond, "published events are forgotten")
}
