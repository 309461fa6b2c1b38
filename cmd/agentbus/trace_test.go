package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentbus/agentbus/internal/tracing"
	"github.com/agentbus/agentbus/internal/uptest"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// recordSpans makes this process record every span until the test ends.
func recordSpans(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.Background())
	})
	return rec
}

// TestAPauseIsOneTrace pauses a session of `up` with its real runtime and
// follows the pause's trace: from the HTTP request through the command, the
// pause requested, the reaction sending it to the sidecar, the relay, the
// sidecar's pause_ack (a separate process, which carries the trace back in
// its Redis entry), the acl worker and the status change.
func TestAPauseIsOneTrace(t *testing.T) {
	rec := recordSpans(t)
	u := startUpWithRuntime(t)
	id := u.start(map[string]any{"workingDirectory": filepath.Join(u.workspace, u.owner, uuid.NewString()[:8]),
		"objective": "Run the suite [scenario:long]"})
	u.waitStatus(id, "Running")

	// The caller's trace, so the request's span is known to belong to it.
	caller := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID(uuid.New()), SpanID: trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}, TraceFlags: trace.FlagsSampled})
	tp := tracing.Traceparent(trace.ContextWithRemoteSpanContext(context.Background(), caller))
	require.NotEmpty(t, tp)
	req, err := http.NewRequest(http.MethodPost, u.base+"/api/agents/sessions/"+id+"/pause", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+u.token)
	req.Header.Set("traceparent", tp)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Less(t, resp.StatusCode, 300, "pause answered %d", resp.StatusCode)
	// The sidecar acknowledges at its next safe point, which the long
	// scenario's minute-long tool call may delay.
	patient := &uptest.Client{T: t, Base: u.base, Token: u.token, Wait: 2*wait + time.Minute}
	patient.WaitFor(id, "Paused", func(s uptest.Session) bool { return s.Status == "Paused" })

	// The sidecar's answer carries the command's trace.
	ack := pauseAck(t, u.redis, id)
	assert.Equal(t, caller.TraceID(), trace.SpanContextFromContext(tracing.WithTraceparent(context.Background(), ack)).TraceID(),
		"the pause_ack entry continues the pause command's trace")

	// Each hop of the pause, by the subject its handler consumed; the
	// session_paused event is handled by several consumers, eventually.
	hops := map[string]string{
		"the command":            "agents.cmd.session.pause_session",
		"the pause requested":    "agents.evt.session." + id + ".session_pause_requested",
		"the relay's command":    "agents.sidecar." + id + ".commands.pause",
		"the sidecar's ack":      "agents.sidecar." + id + ".events.pause_ack",
		"the confirmation":       "agents.cmd.session.confirm_paused",
		"the status change seen": "agents.evt.session." + id + ".session_paused",
	}
	var spans []sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool {
		spans = rec.Ended()
		for _, subject := range hops {
			if len(handled(spans, subject)) == 0 {
				return false
			}
		}
		return true
	}, wait, 50*time.Millisecond, "a hop of the pause has no span")

	var server []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanKind() == trace.SpanKindServer && s.Parent().SpanID() == caller.SpanID() {
			server = append(server, s)
		}
	}
	require.Len(t, server, 1, "the pause request has one server span, a child of the caller's")
	assert.Equal(t, caller.TraceID(), server[0].SpanContext().TraceID())
	for hop, subject := range hops {
		// Commands of every session share a subject; this session is
		// the only one paused.
		for _, s := range handled(spans, subject) {
			assert.Equal(t, caller.TraceID().String(), s.SpanContext().TraceID().String(), "%s (%s, %s)", hop, s.Name(), subject)
			assert.True(t, s.Parent().IsValid(), "%s continues a trace", hop)
		}
	}
}

// handled returns the spans of the handlers that consumed subject.
func handled(spans []sdktrace.ReadOnlySpan, subject string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanKind() != trace.SpanKindConsumer {
			continue
		}
		for _, a := range s.Attributes() {
			if a.Key == "messaging.destination.name" && a.Value.AsString() == subject {
				out = append(out, s)
			}
		}
	}
	return out
}

// pauseAck returns the traceparent field of the session's pause_ack entry.
func pauseAck(t *testing.T, rdb *redis.Client, sessionID string) string {
	t.Helper()
	entries, err := rdb.XRange(context.Background(), protocol.EventsKey(sessionID), "-", "+").Result()
	require.NoError(t, err)
	for _, e := range entries {
		if e.Values[protocol.FieldType] == protocol.EventPauseAck {
			tp, _ := e.Values[protocol.FieldTraceparent].(string)
			return tp
		}
	}
	t.Fatalf("session %s has no pause_ack entry", sessionID)
	return ""
}

// TestASessionLinksToItsTrace starts a session with a request that
// carries the caller's trace: the session keeps the trace id, links to it
// in the tracing UI AGENTBUS_TRACE_URL names, and `sessions show` prints
// both.
func TestASessionLinksToItsTrace(t *testing.T) {
	t.Setenv("AGENTBUS_TRACE_URL", "http://jaeger.example:16686/trace/{traceId}")
	bin := buildAgentbus(t)
	u := startUpWithRuntime(t)
	caller := trace.TraceID(uuid.New())
	id := u.startTraced(caller, map[string]any{"workingDirectory": "traced", "objective": "Say hello", "budgetCapUsd": 5})

	var detail struct {
		TraceID  string `json:"traceId"`
		TraceURL string `json:"traceUrl"`
	}
	u.Must(http.MethodGet, "/api/agents/sessions/"+id, nil, &detail)
	assert.Equal(t, caller.String(), detail.TraceID, "the trace of the request that started it")
	assert.Equal(t, "http://jaeger.example:16686/trace/"+caller.String(), detail.TraceURL)

	c := &cliUnderTest{t: t, bin: bin, api: u.base, token: u.token}
	assert.Regexp(t, `(?m)^Trace\s+`+caller.String()+` http://jaeger\.example:16686/trace/`+caller.String()+`$`, c.must("sessions", "show", id))

	// A session started without a trace has none to link to.
	untraced := u.start(map[string]any{"workingDirectory": "untraced", "objective": "Say hello"})
	var plain map[string]any
	u.Must(http.MethodGet, "/api/agents/sessions/"+untraced, nil, &plain)
	assert.NotContains(t, plain, "traceId")
	assert.NotContains(t, plain, "traceUrl")
	assert.NotContains(t, c.must("sessions", "show", untraced), "Trace")
}

// startTraced starts a session with a request in the caller's trace and
// returns its id.
func (u *upUnderTest) startTraced(traceID trace.TraceID, body map[string]any) string {
	u.t.Helper()
	caller := trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}, TraceFlags: trace.FlagsSampled})
	raw, err := json.Marshal(body)
	require.NoError(u.t, err)
	req, err := http.NewRequest(http.MethodPost, u.base+"/api/agents/sessions", bytes.NewReader(raw))
	require.NoError(u.t, err)
	req.Header.Set("Authorization", "Bearer "+u.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", tracing.Traceparent(trace.ContextWithRemoteSpanContext(context.Background(), caller)))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(u.t, err)
	defer resp.Body.Close()
	require.Equal(u.t, http.StatusCreated, resp.StatusCode)
	var started struct {
		Session struct {
			ID string `json:"id"`
		} `json:"session"`
	}
	require.NoError(u.t, json.NewDecoder(resp.Body).Decode(&started))
	return started.Session.ID
}
