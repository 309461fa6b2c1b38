package main

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
)

// componentCheck is a slog handler that remembers every record logged
// without a component attribute, on the record or on its logger.
type componentCheck struct {
	inner slog.Handler
	has   bool
	state *componentState
}

type componentState struct {
	mu      sync.Mutex
	missing []string
}

func (h componentCheck) Enabled(context.Context, slog.Level) bool { return true }

func (h componentCheck) Handle(ctx context.Context, r slog.Record) error {
	has := h.has
	r.Attrs(func(a slog.Attr) bool {
		has = has || a.Key == "component"
		return !has
	})
	if !has {
		h.state.mu.Lock()
		h.state.missing = append(h.state.missing, r.Message)
		h.state.mu.Unlock()
	}
	if h.inner.Enabled(ctx, r.Level) {
		return h.inner.Handle(ctx, r)
	}
	return nil
}

func (h componentCheck) WithAttrs(attrs []slog.Attr) slog.Handler {
	h.has = h.has || slices.ContainsFunc(attrs, func(a slog.Attr) bool { return a.Key == "component" })
	h.inner = h.inner.WithAttrs(attrs)
	return h
}

func (h componentCheck) WithGroup(name string) slog.Handler {
	h.inner = h.inner.WithGroup(name)
	return h
}

// checkComponents makes every log line of this process, until the test
// ends, be checked for its component; it returns the lines that had none.
func checkComponents(t *testing.T) func() []string {
	prev := slog.Default()
	state := &componentState{}
	// Not prev's handler: slog's initial one writes through the log
	// package, which SetDefault points back at the new handler.
	inner := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})
	slog.SetDefault(slog.New(componentCheck{inner: inner, state: state}))
	t.Cleanup(func() { slog.SetDefault(prev) })
	return func() []string {
		state.mu.Lock()
		defer state.mu.Unlock()
		return slices.Clone(state.missing)
	}
}

// TestUpIsObservable runs a session through `up` and its real runtime and
// looks at it the way an operator does.
func TestUpIsObservable(t *testing.T) {
	missingComponent := checkComponents(t)
	u := startUpWithRuntime(t)
	js := u.jetStream()
	defs, err := bus.DefaultDefinitions()
	require.NoError(t, err)

	t.Run("every consumer the workers read is defined by a file, and read", func(t *testing.T) {
		for _, sc := range defs.Streams {
			stream := sc.Name
			for _, info := range consumers(t, js, stream) {
				if info.Config.Durable == "" {
					continue // an ephemeral consumer, such as a live stream's
				}
				assert.NotNil(t, defs.Consumer(stream, info.Name), "%s/%s has no file under nats/consumers/", stream, info.Name)
			}
			for _, cc := range defs.Consumers[stream] {
				name := cc.Durable
				assert.Eventually(t, func() bool {
					c, err := js.Consumer(context.Background(), stream, name)
					return err == nil && c.CachedInfo().NumWaiting > 0
				}, wait, 50*time.Millisecond, "nothing pulls from %s/%s", stream, name)
			}
		}
	})

	id := u.start(map[string]any{"workingDirectory": filepath.Join(u.workspace, u.owner, uuid.NewString()[:8]), "objective": "Say hello"})
	u.waitReview(id)
	u.Must(http.MethodPost, "/api/agents/sessions/"+id+"/approve", nil, nil)
	u.waitStatus(id, "Completed")

	t.Run("no consumer is behind once the session completed", func(t *testing.T) {
		for _, sc := range defs.Streams {
			stream := sc.Name
			for _, cc := range defs.Consumers[stream] {
				name := cc.Durable
				assert.Eventually(t, bustest.CaughtUp(js, stream, name), wait, 50*time.Millisecond, "%s/%s is behind", stream, name)
			}
		}
	})

	u.stop()
	assert.Empty(t, missingComponent(), "log lines without a component")
}

// jetStream connects to the NATS server of up.
func (u *upUnderTest) jetStream() jetstream.JetStream {
	u.t.Helper()
	i := slices.Index(u.args, "--nats-port")
	require.GreaterOrEqual(u.t, i, 0)
	nc, err := nats.Connect("nats://127.0.0.1:" + u.args[i+1])
	require.NoError(u.t, err)
	u.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(u.t, err)
	return js
}

func consumers(t *testing.T, js jetstream.JetStream, stream string) []*jetstream.ConsumerInfo {
	t.Helper()
	var out []*jetstream.ConsumerInfo
	st, err := js.Stream(context.Background(), stream)
	require.NoError(t, err)
	l := st.ListConsumers(context.Background())
	for info := range l.Info() {
		out = append(out, info)
	}
	require.NoError(t, l.Err())
	return out
}
