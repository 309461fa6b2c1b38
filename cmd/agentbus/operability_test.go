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
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
	"github.com/agentbus/agentbus/internal/uptest"
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
	nc, err := nats.Connect(uptest.Credentials(u.t, u.dataDir)["NATS_URL"])
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

// TestMetricsOfUp scrapes /metrics of `up` running without its delivery
// worker and its relay, during a session of the script engine: what those
// two would have handled shows as a consumer's pending messages and as the
// relay's lag.
func TestMetricsOfUp(t *testing.T) {
	u := startUpWithRuntime(t, "--without-workers", "delivery,relay")
	id := u.start(map[string]any{"workingDirectory": filepath.Join(u.workspace, u.owner, uuid.NewString()[:8]), "objective": "Say hello"})
	u.sidecarPID(id)
	u.Enqueue(id, "Then say goodbye", "Queued")

	// A live stream, counted while it is open.
	req, err := http.NewRequest(http.MethodGet, u.base+"/api/agents/sessions/"+id+"/stream", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+u.token)
	stream, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer stream.Body.Close()
	require.Equal(t, http.StatusOK, stream.StatusCode)

	var m scrape
	require.Eventually(t, func() bool {
		m = u.scrape()
		return m.value("agentbus_consumer_pending_messages", "consumer", "delivery") > 0 &&
			m.value("agentbus_relay_lag_seconds", "session_id", id) > 0
	}, wait, 200*time.Millisecond, "no pending messages for the stopped delivery worker, or no relay lag for the stopped relay")

	assert.Positive(t, m.value("agentbus_relay_unforwarded_entries", "session_id", id), "the sidecar's events wait in Redis")
	assert.GreaterOrEqual(t, m.value("agentbus_relay_max_lag_seconds"), m.value("agentbus_relay_lag_seconds", "session_id", id))
	assert.Positive(t, m.value("agentbus_relay_lagging_sessions"))
	assert.Zero(t, m.value("agentbus_consumer_pending_messages", "consumer", "pool"), "a running worker keeps up")
	assert.Positive(t, m.value("agentbus_consumer_waiting_pulls", "consumer", "pool"), "a running worker pulls")
	assert.Zero(t, m.value("agentbus_consumer_waiting_pulls", "consumer", "delivery"), "nothing pulls for the stopped worker")
	assert.Positive(t, m.value("agentbus_stream_messages_total", "stream", "AGENTS_EVENTS"))
	assert.True(t, m.has("agentbus_consumer_ack_pending_messages", "consumer", "delivery"))
	assert.True(t, m.has("agentbus_consumer_redelivered_messages", "consumer", "delivery"))
	assert.True(t, m.has("agentbus_outbox_backlog_events"))
	assert.True(t, m.has("agentbus_outbox_oldest_event_age_seconds"))
	assert.Equal(t, 1.0, m.value("agentbus_pool_slots_used", "owner_id", u.owner), "the session holds a slot")
	assert.Positive(t, m.value("agentbus_pool_utilization_ratio", "owner_id", u.owner))
	assert.Positive(t, m.value("agentbus_sidecars"))
	assert.Positive(t, m.value("agentbus_sidecar_starts_total", "restart", "false"))
	assert.Positive(t, m.value("agentbus_sse_clients"), "the open stream")
	assert.Positive(t, m.value("agentbus_http_request_duration_seconds_count", "operation", "start-session"))
	assert.Positive(t, m.value("agentbus_command_duration_seconds_count", "command", "start_session", "outcome", "applied"))
}

// TestSteeringLatencyOfUp steers a session of `up` with its real runtime
// and finds the time from enqueueing to message_delivered in /metrics.
func TestSteeringLatencyOfUp(t *testing.T) {
	u := startUpWithRuntime(t)
	id := u.start(map[string]any{"workingDirectory": filepath.Join(u.workspace, u.owner, uuid.NewString()[:8]), "objective": "Say hello"})
	u.waitReview(id)
	before := u.scrape()
	count := max(0, before.value("agentbus_steering_latency_seconds_count", "priority", "Immediate"))
	sum := max(0, before.value("agentbus_steering_latency_seconds_sum", "priority", "Immediate"))

	sent := time.Now()
	m := u.Enqueue(id, "Now say goodbye", "Immediate")
	u.WaitDelivered(id, m)
	seen := time.Since(sent)

	var after scrape
	require.Eventually(t, func() bool {
		after = u.scrape()
		return after.value("agentbus_steering_latency_seconds_count", "priority", "Immediate") == count+1
	}, wait, 100*time.Millisecond, "the delivery was not measured once")
	latency := after.value("agentbus_steering_latency_seconds_sum", "priority", "Immediate") - sum
	assert.Positive(t, latency)
	// Enqueued after the request was sent, delivered before the test saw it.
	assert.LessOrEqual(t, latency, seen.Seconds(), "the latency lies within what the test saw")
}

// scrape is one scrape of /metrics: each sample's value by its name and labels.
type scrape map[string][]sample

type sample struct {
	labels map[string]string
	value  float64
}

func (u *upUnderTest) scrape() scrape {
	u.t.Helper()
	resp, err := http.Get(u.base + "/metrics")
	require.NoError(u.t, err)
	defer resp.Body.Close()
	require.Equal(u.t, http.StatusOK, resp.StatusCode)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(u.t, err)
	out := scrape{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			s := sample{labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.Gauge != nil:
				s.value = m.GetGauge().GetValue()
			case m.Counter != nil:
				s.value = m.GetCounter().GetValue()
			case m.Histogram != nil:
				sum := sample{labels: s.labels, value: m.GetHistogram().GetSampleSum()}
				out[name+"_sum"] = append(out[name+"_sum"], sum)
				s.value = float64(m.GetHistogram().GetSampleCount())
				name += "_count"
			}
			out[name] = append(out[name], s)
			name = f.GetName()
		}
	}
	return out
}

// find returns the first sample of name whose labels include the pairs.
func (s scrape) find(name string, pairs ...string) (sample, bool) {
	for _, x := range s[name] {
		ok := true
		for i := 0; i+1 < len(pairs); i += 2 {
			ok = ok && x.labels[pairs[i]] == pairs[i+1]
		}
		if ok {
			return x, true
		}
	}
	return sample{}, false
}

func (s scrape) has(name string, pairs ...string) bool {
	_, ok := s.find(name, pairs...)
	return ok
}

// value is the sample's value, or -1 when there is none.
func (s scrape) value(name string, pairs ...string) float64 {
	x, ok := s.find(name, pairs...)
	if !ok {
		return -1
	}
	return x.value
}
