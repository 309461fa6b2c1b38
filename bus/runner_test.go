package bus_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
)

// waitFor is generous: the tests share two cores and run with -race.
const waitFor = 60 * time.Second

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
}

// runnerConfig is a runner on every event, with a consumer created from the
// config and a short backoff.
func runnerConfig(t testing.TB, consumer string, h bus.Handler) bus.RunnerConfig {
	return bus.RunnerConfig{
		Stream:         bus.StreamEvents,
		Consumer:       consumer,
		FilterSubjects: []string{"agents.evt.>"},
		Handler:        h,
		Backoff:        []time.Duration{10 * time.Millisecond},
		IdleHeartbeat:  time.Second,
		Logger:         testLogger(t),
	}
}

type running struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// start runs bus.Run until stop or the end of the test.
func start(t testing.TB, js jetstream.JetStream, cfg bus.RunnerConfig) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = bus.Run(ctx, js, cfg)
	}()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) stop(t testing.TB) error {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(waitFor):
		t.Fatal("Run did not return after its context ended")
	}
	return r.err
}

func (r *running) returned() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// counter counts handled messages by Nats-Msg-Id.
type counter struct {
	mu    sync.Mutex
	count map[string]int
}

func newCounter() *counter { return &counter{count: map[string]int{}} }

func (c *counter) add(m jetstream.Msg) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := m.Headers().Get("Nats-Msg-Id")
	c.count[id]++
	return c.count[id]
}

func (c *counter) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.count)
}

func (c *counter) get(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count[id]
}

func (c *counter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.count))
	for k, v := range c.count {
		out[k] = v
	}
	return out
}

func publishEvents(t testing.TB, js jetstream.JetStream, prefix string, n, sessions int) []*nats.Msg {
	t.Helper()
	msgs := eventMsgs(t, prefix, n, sessions)
	require.NoError(t, newPublisher(t, js).PublishMsgs(context.Background(), msgs))
	return msgs
}

func consumerInfo(t testing.TB, js jetstream.JetStream, stream, name string) *jetstream.ConsumerInfo {
	t.Helper()
	c, err := js.Consumer(context.Background(), stream, name)
	require.NoError(t, err)
	info, err := c.Info(context.Background())
	require.NoError(t, err)
	return info
}

func settled(t testing.TB, js jetstream.JetStream, stream, name string) func() bool {
	return func() bool {
		info := consumerInfo(t, js, stream, name)
		return info.NumAckPending == 0 && info.NumPending == 0 && info.NumRedelivered == 0
	}
}

func TestRunAcksHandledMessages(t *testing.T) {
	t.Parallel()
	_, js, _ := bustest.Server(t)
	seen := newCounter()
	var traced atomic.Int64
	start(t, js, runnerConfig(t, "ack", func(ctx context.Context, m jetstream.Msg) error {
		if bus.Traceparent(ctx) == traceparent {
			traced.Add(1)
		}
		seen.add(m)
		return nil
	}))

	msgs := eventMsgs(t, "ack", 100, 5)
	for _, m := range msgs {
		m.Header.Set("traceparent", traceparent)
	}
	require.NoError(t, newPublisher(t, js).PublishMsgs(context.Background(), msgs))

	require.Eventually(t, func() bool { return seen.distinct() == 100 }, waitFor, 10*time.Millisecond)
	require.Eventually(t, settled(t, js, bus.StreamEvents, "ack"), waitFor, 10*time.Millisecond)
	for id, n := range seen.snapshot() {
		assert.Equal(t, 1, n, "%s handled once", id)
	}
	assert.EqualValues(t, 100, traced.Load(), "handlers see the message's traceparent")
}

func TestRunRedeliversAfterError(t *testing.T) {
	t.Parallel()
	_, js, _ := bustest.Server(t)
	attempts := newCounter()
	var succeeded atomic.Int64
	start(t, js, runnerConfig(t, "resend", func(_ context.Context, m jetstream.Msg) error {
		if attempts.add(m) == 1 {
			return errors.New("database unavailable")
		}
		md, err := m.Metadata()
		if err != nil {
			return err
		}
		if md.NumDelivered == 2 {
			succeeded.Add(1)
		}
		return nil
	}))
	publishEvents(t, js, "resend", 20, 2)

	require.Eventually(t, func() bool { return succeeded.Load() == 20 }, waitFor, 10*time.Millisecond)
	require.Eventually(t, settled(t, js, bus.StreamEvents, "resend"), waitFor, 10*time.Millisecond)
	for id, n := range attempts.snapshot() {
		assert.Equal(t, 2, n, "%s tried twice", id)
	}
	assert.Zero(t, streamMsgs(t, js, bus.StreamDLQ))
}

func TestRunDeadLetters(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		handler   func(jetstream.Msg) error
		attempts  int
		errorText string
	}{
		{
			name:      "after max deliveries",
			handler:   func(jetstream.Msg) error { return errors.New("still failing\nsecond line") },
			attempts:  3,
			errorText: "still failing second line",
		},
		{
			name:      "permanent error at once",
			handler:   func(jetstream.Msg) error { return bus.Permanent(errors.New("malformed")) },
			attempts:  1,
			errorText: "permanent: malformed",
		},
		{
			name:      "panic counts as an error",
			handler:   func(jetstream.Msg) error { panic("boom") },
			attempts:  3,
			errorText: "bus: handler panicked: boom",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, js, _ := bustest.Server(t)
			ctx := context.Background()
			attempts := newCounter()
			cfg := runnerConfig(t, "dlq-test", func(_ context.Context, m jetstream.Msg) error {
				attempts.add(m)
				if string(m.Data()) == "good" {
					return nil
				}
				return tt.handler(m)
			})
			cfg.MaxDeliver = 3
			start(t, js, cfg)

			bad := nats.NewMsg(bus.EventSubject("session", "s1", "bad"))
			bad.Header.Set("Nats-Msg-Id", "bad-1")
			bad.Header.Set("Agents-Type", "bad")
			bad.Header.Set("traceparent", traceparent)
			bad.Data = []byte(`{"broken":`)
			_, err := js.PublishMsg(ctx, bad)
			require.NoError(t, err)

			dlq, err := js.Stream(ctx, bus.StreamDLQ)
			require.NoError(t, err)
			var dead *jetstream.RawStreamMsg
			require.Eventually(t, func() bool {
				dead, err = dlq.GetLastMsgForSubject(ctx, "agents.dlq.dlq-test")
				return err == nil
			}, waitFor, 10*time.Millisecond)

			assert.Equal(t, bad.Data, dead.Data)
			assert.Equal(t, tt.errorText, dead.Header.Get("Agents-Error"))
			assert.Equal(t, bad.Subject, dead.Header.Get("Agents-Original-Subject"))
			assert.Equal(t, bus.StreamEvents, dead.Header.Get("Agents-Original-Stream"))
			assert.Equal(t, "1", dead.Header.Get("Agents-Original-Sequence"))
			assert.Equal(t, "bad-1", dead.Header.Get("Agents-Original-Msg-Id"))
			assert.Equal(t, "dlq-test", dead.Header.Get("Agents-Consumer"))
			assert.Equal(t, strconv.Itoa(tt.attempts), dead.Header.Get("Agents-Deliveries"))
			assert.Equal(t, "bad", dead.Header.Get("Agents-Type"))
			assert.Equal(t, traceparent, dead.Header.Get("traceparent"))
			assert.Equal(t, "dlq-test:AGENTS_EVENTS:1", dead.Header.Get("Nats-Msg-Id"))

			// The runner goes on with the next message.
			good := nats.NewMsg(bus.EventSubject("session", "s1", "good"))
			good.Header.Set("Nats-Msg-Id", "good-1")
			good.Data = []byte("good")
			_, err = js.PublishMsg(ctx, good)
			require.NoError(t, err)
			require.Eventually(t, func() bool { return attempts.get("good-1") == 1 }, waitFor, 10*time.Millisecond)
			require.Eventually(t, settled(t, js, bus.StreamEvents, "dlq-test"), waitFor, 10*time.Millisecond)
			assert.Equal(t, tt.attempts, attempts.get("bad-1"))
			assert.EqualValues(t, 1, streamMsgs(t, js, bus.StreamDLQ))
		})
	}
}

func TestRunDeadLettersMessageWhoseHandlerNeverReturned(t *testing.T) {
	t.Parallel()
	_, js, _ := bustest.Server(t)
	ctx := context.Background()
	var called atomic.Int64
	cfg := runnerConfig(t, "crashy", func(context.Context, jetstream.Msg) error {
		called.Add(1)
		return nil
	})
	cfg.MaxDeliver = 2
	cfg.AckWait = 200 * time.Millisecond

	// A process that died on the message twice: delivered, never settled.
	cons, err := js.CreateOrUpdateConsumer(ctx, bus.StreamEvents, jetstream.ConsumerConfig{
		Durable: "crashy", Description: "created by bus.Run", FilterSubject: "agents.evt.>",
		DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: cfg.AckWait, MaxDeliver: cfg.MaxDeliver + 1, MaxAckPending: 1000,
	})
	require.NoError(t, err)
	publishEvents(t, js, "crash", 1, 1)
	for range 2 {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(waitFor))
		require.NoError(t, err)
		n := 0
		for range batch.Messages() {
			n++
		}
		require.Equal(t, 1, n)
	}

	start(t, js, cfg)
	dlq, err := js.Stream(ctx, bus.StreamDLQ)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := dlq.GetLastMsgForSubject(ctx, "agents.dlq.crashy")
		return err == nil
	}, waitFor, 10*time.Millisecond)
	require.Eventually(t, settled(t, js, bus.StreamEvents, "crashy"), waitFor, 10*time.Millisecond)
	assert.Zero(t, called.Load(), "the handler is not tried beyond MaxDeliver")
}

func TestRunKeepsOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		concurrency int
		key         func(jetstream.Msg) string
	}{
		{"one at a time", 1, nil},
		{"per subject, concurrently", 4, bus.BySubject},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, js, _ := bustest.Server(t)
			var (
				mu       sync.Mutex
				versions = map[string][]int64{}
				total    atomic.Int64
			)
			cfg := runnerConfig(t, "ordered", func(_ context.Context, m jetstream.Msg) error {
				env, err := bus.DecodeEnvelope(m.Data())
				if err != nil {
					return bus.Permanent(err)
				}
				mu.Lock()
				versions[m.Subject()] = append(versions[m.Subject()], env.Version)
				mu.Unlock()
				total.Add(1)
				return nil
			})
			cfg.Concurrency, cfg.OrderKey = tt.concurrency, tt.key
			start(t, js, cfg)
			publishEvents(t, js, "order", 600, 3)

			require.Eventually(t, func() bool { return total.Load() == 600 }, waitFor, 10*time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			require.Len(t, versions, 3)
			for subject, vs := range versions {
				assert.Len(t, vs, 200, subject)
				assert.True(t, slices.IsSorted(vs), "%s handled in publish order", subject)
			}
		})
	}
}

func TestRunCopiesShareConsumer(t *testing.T) {
	t.Parallel()
	_, js, _ := bustest.Server(t)
	seen := newCounter()
	var byCopy [2]atomic.Int64
	for i := range 2 {
		cfg := runnerConfig(t, "shared", func(_ context.Context, m jetstream.Msg) error {
			seen.add(m)
			byCopy[i].Add(1)
			return nil
		})
		cfg.Concurrency = 2
		start(t, js, cfg)
	}
	// Both copies wait with a pull request before anything is published.
	require.Eventually(t, func() bool {
		// The copies create the consumer as they start: until then it is
		// not found, which is not a failure.
		c, err := js.Consumer(context.Background(), bus.StreamEvents, "shared")
		if err != nil {
			return false
		}
		info, err := c.Info(context.Background())
		return err == nil && info.NumWaiting >= 2
	}, waitFor, 10*time.Millisecond)

	publishEvents(t, js, "shared", 1000, 10)
	require.Eventually(t, func() bool { return seen.distinct() == 1000 }, waitFor, 10*time.Millisecond)
	require.Eventually(t, settled(t, js, bus.StreamEvents, "shared"), waitFor, 10*time.Millisecond)
	for id, n := range seen.snapshot() {
		require.Equal(t, 1, n, "%s handled by one copy only", id)
	}
	assert.Positive(t, byCopy[0].Load())
	assert.Positive(t, byCopy[1].Load())
	assert.EqualValues(t, 1000, byCopy[0].Load()+byCopy[1].Load())
}

func TestRunShutdownFinishesInFlight(t *testing.T) {
	t.Parallel()
	_, js, _ := bustest.Server(t)
	var (
		started  = make(chan struct{})
		release  = make(chan struct{})
		ctxAlive atomic.Bool
		once     sync.Once
	)
	seen := newCounter()
	cfg := runnerConfig(t, "graceful", func(ctx context.Context, m jetstream.Msg) error {
		if seen.add(m) == 1 && m.Headers().Get("Nats-Msg-Id") == "graceful-0" {
			once.Do(func() { close(started) })
			<-release
			ctxAlive.Store(ctx.Err() == nil)
		}
		return nil
	})
	cfg.AckWait = 10 * time.Minute
	run := start(t, js, cfg)
	publishEvents(t, js, "graceful", 10, 1)
	<-started

	stopped := make(chan error, 1)
	go func() { stopped <- run.stop(t) }()
	assert.Never(t, run.returned, 300*time.Millisecond, 10*time.Millisecond, "Run waits for the handler")
	close(release)
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(waitFor):
		t.Fatal("Run did not return")
	}
	assert.True(t, ctxAlive.Load(), "the handler's context outlives Run's")
	assert.Equal(t, 1, seen.get("graceful-0"))
	info := consumerInfo(t, js, bus.StreamEvents, "graceful")
	assert.GreaterOrEqual(t, info.AckFloor.Stream, uint64(1), "the in-flight message was acknowledged")

	// Nothing is lost: the next runner handles the rest, long before their
	// ack wait, since the stopped runner handed them back.
	start(t, js, cfg)
	require.Eventually(t, func() bool { return seen.distinct() == 10 }, waitFor, 10*time.Millisecond)
	require.Eventually(t, settled(t, js, bus.StreamEvents, "graceful"), waitFor, 10*time.Millisecond)
	assert.Equal(t, 1, seen.get("graceful-0"))
}

func TestRunReportsProgress(t *testing.T) {
	t.Parallel()
	_, js, _ := bustest.Server(t)
	seen := newCounter()
	cfg := runnerConfig(t, "slow", func(ctx context.Context, m jetstream.Msg) error {
		seen.add(m)
		// Several ack waits long; without progress reports the server
		// would redeliver it meanwhile.
		time.Sleep(4 * time.Second)
		return nil
	})
	cfg.AckWait = 1500 * time.Millisecond
	cfg.BatchSize = 1
	start(t, js, cfg)
	publishEvents(t, js, "slow", 1, 1)

	require.Eventually(t, settled(t, js, bus.StreamEvents, "slow"), waitFor, 50*time.Millisecond)
	assert.Equal(t, 1, seen.get("slow-0"), "handled once")
	assert.Zero(t, consumerInfo(t, js, bus.StreamEvents, "slow").NumRedelivered)
}

func TestRunUsesConsumerDefinition(t *testing.T) {
	t.Parallel()
	_, js, _ := bustest.Server(t)
	defs, err := bus.LoadDefinitions(fstest.MapFS{
		"streams/AGENTS_EVENTS.json": {Data: []byte(`{"name":"AGENTS_EVENTS","subjects":["agents.evt.>"],"storage":"file","retention":"limits"}`)},
		"consumers/AGENTS_EVENTS/defined.json": {Data: []byte(`{
			"durable_name": "defined", "description": "from its file", "filter_subject": "agents.evt.session.>",
			"ack_policy": "explicit", "ack_wait": 1000000000, "backoff": [1000000000, 1000000000], "max_deliver": 3}`)},
	})
	require.NoError(t, err)
	attempts := newCounter()
	cfg := runnerConfig(t, "defined", func(_ context.Context, m jetstream.Msg) error {
		attempts.add(m)
		return errors.New("failing")
	})
	cfg.Definitions = defs
	cfg.FilterSubjects = nil
	start(t, js, cfg)

	publishEvents(t, js, "defined", 1, 1)
	require.Eventually(t, func() bool { return streamMsgs(t, js, bus.StreamDLQ) == 1 }, waitFor, 10*time.Millisecond)
	info := consumerInfo(t, js, bus.StreamEvents, "defined")
	assert.Equal(t, "from its file", info.Config.Description)
	assert.Equal(t, "agents.evt.session.>", info.Config.FilterSubject)
	assert.Equal(t, 2, attempts.get("defined-0"), "max_deliver 3: two handler attempts and a spare delivery")
}

func TestRunRecreatesDeletedConsumer(t *testing.T) {
	t.Parallel()
	_, js, _ := bustest.Server(t)
	seen := newCounter()
	start(t, js, runnerConfig(t, "phoenix", func(_ context.Context, m jetstream.Msg) error {
		seen.add(m)
		return nil
	}))
	publishEvents(t, js, "before", 10, 1)
	require.Eventually(t, func() bool { return seen.distinct() == 10 }, waitFor, 10*time.Millisecond)

	require.NoError(t, js.DeleteConsumer(context.Background(), bus.StreamEvents, "phoenix"))
	publishEvents(t, js, "after", 10, 1)
	require.Eventually(t, func() bool { return seen.distinct() == 20 }, waitFor, 10*time.Millisecond)
}
