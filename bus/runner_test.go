package bus_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
)

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
		c, err := js.Consumer(context.Background(), bus.StreamEvents, "shared")
		return err == nil && c.CachedInfo().NumWaiting >= 2
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
	// The ack left before Run returned; the server applies it to the
	// consumer on its own time.
	assert.Eventually(t, func() bool {
		return consumerInfo(t, js, bus.StreamEvents, "graceful").AckFloor.Stream >= 1
	}, waitFor, 10*time.Millisecond, "the in-flight message was acknowledged")

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

	// A consumer that has only just been created can look settled before
	// it has counted the message: wait for the handler first.
	require.Eventually(t, func() bool { return seen.get("slow-0") > 0 }, waitFor, 50*time.Millisecond)
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
	require.Eventually(t, func() bool {
		s, err := js.Stream(context.Background(), bus.StreamDLQ)
		return err == nil && s.CachedInfo().State.Msgs == 1
	}, waitFor, 10*time.Millisecond)
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

func TestRunRejectsInvalidConfig(t *testing.T) {
	t.Parallel()
	ok := func(context.Context, jetstream.Msg) error { return nil }
	tests := map[string]bus.RunnerConfig{
		"no stream":              {Consumer: "c", Handler: ok},
		"no consumer":            {Stream: bus.StreamEvents, Handler: ok},
		"consumer with a dot":    {Stream: bus.StreamEvents, Consumer: "a.b", Handler: ok},
		"consumer with wildcard": {Stream: bus.StreamEvents, Consumer: "a*", Handler: ok},
		"no handler":             {Stream: bus.StreamEvents, Consumer: "c"},
		"heartbeat too slow":     {Stream: bus.StreamEvents, Consumer: "c", Handler: ok, IdleHeartbeat: time.Minute},
	}
	for name, cfg := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Error(t, bus.Run(context.Background(), nil, cfg))
		})
	}
}

// TestRunRetriesInOrder fails the first attempt of every fifth message: with
// RetryInOrder the lane retries it before anything behind it, so each
// subject's messages still succeed in publish order, each once.
func TestRunRetriesInOrder(t *testing.T) {
	t.Parallel()
	_, js, _ := bustest.Server(t)
	var (
		mu       sync.Mutex
		versions = map[string][]int64{}
		total    atomic.Int64
	)
	attempts := newCounter()
	cfg := runnerConfig(t, "retry-in-order", func(_ context.Context, m jetstream.Msg) error {
		env, err := bus.DecodeEnvelope(m.Data())
		if err != nil {
			return bus.Permanent(err)
		}
		if env.Version%5 == 0 && attempts.add(m) == 1 {
			return errors.New("database restarting")
		}
		mu.Lock()
		versions[m.Subject()] = append(versions[m.Subject()], env.Version)
		mu.Unlock()
		total.Add(1)
		return nil
	})
	cfg.Concurrency, cfg.OrderKey, cfg.RetryInOrder = 4, bus.BySubject, true
	start(t, js, cfg)
	publishEvents(t, js, "retry-order", 150, 3)

	require.Eventually(t, func() bool { return total.Load() == 150 }, waitFor, 10*time.Millisecond)
	require.Eventually(t, settled(t, js, bus.StreamEvents, "retry-in-order"), waitFor, 10*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, versions, 3)
	for subject, vs := range versions {
		assert.Len(t, vs, 50, subject)
		assert.True(t, slices.IsSorted(vs), "%s handled in publish order despite the failures: %v", subject, vs)
	}
	assert.Zero(t, streamMsgs(t, js, bus.StreamDLQ))
}
