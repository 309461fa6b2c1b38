// Package tracing sets up OpenTelemetry tracing for an agentbus process and
// carries the W3C trace context across the bus: in NATS headers and in the
// fields of a sidecar's Redis entries, both named traceparent.
//
// Spans are exported only when OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set, by the OTLP/HTTP exporter,
// which reads the rest of the standard OTEL_* variables itself. Without it,
// no span is recorded, but a trace context that arrives is still passed on,
// so a trace started by a caller reaches every process it crosses.
package tracing

import (
	"context"
	"errors"
	"os"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Field is the name of the trace context in NATS headers and in Redis
// entries.
const Field = "traceparent"

// propagator is the W3C trace context, the one format agentbus speaks on
// the wire, whatever propagator the process installed globally.
var propagator = propagation.TraceContext{}

// Setup installs the W3C propagator and, when an OTLP endpoint is
// configured, a tracer provider exporting spans of service to it. The
// returned function flushes and stops the exporter.
func Setup(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	noop := func(context.Context) error { return nil }
	if !exporting() {
		return noop, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return noop, err
	}
	// WithFromEnv lets OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// override the defaults.
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return noop, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

// exporting reports whether spans are to be exported: an OTLP endpoint is
// configured and the SDK is not disabled.
func exporting() bool {
	if os.Getenv("OTEL_SDK_DISABLED") == "true" {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Tracer is the tracer of agentbus's own spans.
func Tracer() trace.Tracer {
	return otel.Tracer("github.com/agentbus/agentbus")
}

// Traceparent returns the W3C traceparent of ctx's span, or "" when ctx
// carries no valid span context.
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c[Field]
}

// TraceID returns the W3C trace id of ctx's span (32 lowercase hex
// digits), or "" when ctx carries no valid span context.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// WithTraceparent returns ctx continuing the trace of traceparent tp, as a
// remote parent. A missing or malformed tp leaves ctx as it is.
func WithTraceparent(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{Field: tp})
}

// Valid reports whether tp is a well-formed W3C traceparent, which also
// keeps line breaks out of a header.
func Valid(tp string) bool {
	return trace.SpanContextFromContext(WithTraceparent(context.Background(), tp)).IsValid()
}
