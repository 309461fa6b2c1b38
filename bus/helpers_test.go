package bus_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
	"github.com/agentbus/agentbus/internal/testenv"
)

// TestMain stops the Postgres servers the tests started.
func TestMain(m *testing.M) { testenv.Main(m) }

// waitFor is generous: the tests share two cores and run with -race.
const waitFor = 60 * time.Second

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
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

// settled is a condition for require.Eventually: the consumer exists and
// every message was acknowledged or terminated. It must not fail the test,
// since Eventually runs it on another goroutine.
func settled(t testing.TB, js jetstream.JetStream, stream, name string) func() bool {
	caughtUp := bustest.CaughtUp(js, stream, name)
	return func() bool {
		if !caughtUp() {
			return false
		}
		c, err := js.Consumer(context.Background(), stream, name)
		if err != nil {
			return false
		}
		info, err := c.Info(context.Background())
		return err == nil && info.NumRedelivered == 0
	}
}
