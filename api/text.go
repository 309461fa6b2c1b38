package api

import (
	"bytes"
	"io"
	"sort"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/agentbus/agentbus/internal/jsontext"
)

// checkText is the middleware that refuses, before any handler runs, a
// request whose text Postgres could not store: a NUL character, or bytes
// that are not UTF-8, in any string of the JSON body (values and keys, at
// any depth), in a path or query parameter, or in the Idempotency-Key.
// Every operation gets the check without code of its own, and the caller
// gets a 422 naming the field instead of a command that the database
// refuses deep in a worker.
func (s *Server) checkText(ctx huma.Context, next func(huma.Context)) {
	op := ctx.Operation()
	if op == nil {
		next(ctx)
		return
	}
	for _, p := range op.Parameters {
		if p.In != "path" {
			continue
		}
		if reason := jsontext.CheckString(ctx.Param(p.Name)); reason != "" {
			s.writeTextError(ctx, "path."+p.Name, reason)
			return
		}
	}
	u := ctx.URL()
	query := u.Query()
	names := make([]string, 0, len(query))
	for name := range query {
		names = append(names, name)
	}
	sort.Strings(names) // the same request names the same field
	for _, name := range names {
		for _, v := range append([]string{name}, query[name]...) {
			if reason := jsontext.CheckString(v); reason != "" {
				s.writeTextError(ctx, "query."+jsontext.Clean(name), reason)
				return
			}
		}
	}
	if reason := jsontext.CheckString(ctx.Header(IdempotencyKeyHeader)); reason != "" {
		s.writeTextError(ctx, "header."+IdempotencyKeyHeader, reason)
		return
	}
	if op.RequestBody == nil {
		next(ctx)
		return
	}
	body, err := io.ReadAll(limitBody(ctx, op))
	if err != nil {
		s.writeError(ctx, huma.Error400BadRequest("unable to read the request body"))
		return
	}
	// A body that is not JSON is left to the decoder, which says where.
	if p, _ := jsontext.Check(body); p != nil {
		field := "body"
		if p.Path != "" {
			field += "." + p.Path
		}
		s.writeTextError(ctx, field, p.Reason)
		return
	}
	next(&bodyContext{humaContext: ctx, body: bytes.NewReader(body)})
}

func (s *Server) writeTextError(ctx huma.Context, field, reason string) {
	s.writeError(ctx, NewKindError(KindValidation, field+" "+reason).WithField(field))
}

// limitBody returns the request body, cut one byte after the operation's
// limit: the decoder then sees the body is too large and says so (413).
func limitBody(ctx huma.Context, op *huma.Operation) io.Reader {
	limit := op.MaxBodyBytes
	if limit == 0 {
		limit = MaxBodyBytes
	}
	if limit < 0 {
		return ctx.BodyReader()
	}
	return io.LimitReader(ctx.BodyReader(), limit+1)
}

// bodyContext serves a request body a middleware already read.
type bodyContext struct {
	humaContext
	body io.Reader
}

func (c *bodyContext) BodyReader() io.Reader { return c.body }

// SetReadDeadline leaves the connection's read deadline alone. The body was
// read already; the deadline Huma sets before it decodes a body (the
// operation's BodyReadTimeout, 5 s unless set) would bound only net/http's
// background read of the idle connection, whose timeout cancels the
// request's context: a handler still waiting then (for a command's result
// while Postgres restarts, say) failed with context.Canceled, a 500 the
// client received.
func (c *bodyContext) SetReadDeadline(time.Time) error { return nil }
