package tracing_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentbus/agentbus/internal/tracing"
)

const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestTraceparentRoundTrips(t *testing.T) {
	assert.Equal(t, tp, tracing.Traceparent(tracing.WithTraceparent(context.Background(), tp)))
	assert.Empty(t, tracing.Traceparent(context.Background()))
	for _, bad := range []string{"", "00-4bf92f3577b34da6a3ce929d0e0e4736", "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nX: y"} {
		assert.False(t, tracing.Valid(bad), "%q", bad)
		assert.Empty(t, tracing.Traceparent(tracing.WithTraceparent(context.Background(), bad)), "%q", bad)
	}
	assert.True(t, tracing.Valid(tp))
}

// TestSpansContinueTheTraceparent starts a span under a received
// traceparent: it is the same trace, and what it passes on names the span.
func TestSpansContinueTheTraceparent(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	ctx, span := tracing.Tracer().Start(tracing.WithTraceparent(context.Background(), tp), "handle")
	span.End()
	got := tracing.Traceparent(ctx)
	assert.Equal(t, tp[:36], got[:36], "the same trace")
	assert.NotEqual(t, tp, got, "with the handler's span as parent")
	assert.Len(t, rec.Ended(), 1)
}

func TestSetupExportsOnlyWithAnEndpoint(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	prev := otel.GetTracerProvider()
	shutdown, err := tracing.Setup(context.Background(), "test")
	assert.NoError(t, err)
	assert.NoError(t, shutdown(context.Background()))
	assert.Equal(t, prev, otel.GetTracerProvider(), "no endpoint, no exporting provider")

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	shutdown, err = tracing.Setup(context.Background(), "test")
	assert.NoError(t, err)
	_, isSDK := otel.GetTracerProvider().(*sdktrace.TracerProvider)
	assert.True(t, isSDK, "an endpoint installs the SDK's provider")
	otel.SetTracerProvider(prev)
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	_ = shutdown(ctx) // nothing listens there; only the provider matters
}
