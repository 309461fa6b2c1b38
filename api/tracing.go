package api

import (
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentbus/agentbus/internal/tracing"
)

// traced is the middleware giving each operation a server span, named by
// its operation id and continuing the caller's traceparent when it sent
// one. The commands it sends carry the span on (bus.PublishMsg), so one
// trace leads from the request through everything the command causes.
func traced(ctx huma.Context, next func(huma.Context)) {
	op := "unknown"
	if o := ctx.Operation(); o != nil && o.OperationID != "" {
		op = o.OperationID
	}
	parent := tracing.WithTraceparent(ctx.Context(), ctx.Header(tracing.Field))
	spanCtx, span := tracing.Tracer().Start(parent, op, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String("http.request.method", ctx.Method()),
		attribute.String("http.route", routeOf(ctx)),
	))
	defer span.End()
	next(huma.WithContext(ctx, spanCtx))
	status := ctx.Status()
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	if status >= http.StatusInternalServerError {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
}

// routeOf is the operation's path template, or "" outside an operation.
func routeOf(ctx huma.Context) string {
	if o := ctx.Operation(); o != nil {
		return o.Path
	}
	return ""
}
