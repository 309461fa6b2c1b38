package main

import (
	"context"
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
