package api

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/domain"
)

type positionKey struct{}

// positionOf returns the position checkResume resolved.
func positionOf(ctx context.Context) streamPosition {
	p, _ := ctx.Value(positionKey{}).(streamPosition)
	return p
}

// checkResume reads Last-Event-ID and since before the stream starts and
// answers 422 for a position the stream cannot honour: not a number or a
// time, beyond the end of the log, or an event this stream would not have
// sent (another session's, another caller's). Such a position would
// otherwise give silence or skip events.
func (s *Server) checkResume(ctx huma.Context, next func(huma.Context)) {
	var pos streamPosition
	if h := ctx.Header("Last-Event-ID"); h != "" {
		after, err := strconv.ParseUint(strings.TrimSpace(h), 10, 63)
		if err != nil {
			s.writeError(ctx, huma.Error422UnprocessableEntity("Last-Event-ID must be an event id", &huma.ErrorDetail{
				Location: "header.Last-Event-ID", Message: "not an event id", Value: h}))
			return
		}
		if err := s.checkEventID(ctx, after); err != nil {
			s.writeError(ctx, err)
			return
		}
		pos.After, pos.Set = after, true
	} else if q := ctx.Query("since"); q != "" {
		if q == "0" {
			pos.FromStart = true
		} else {
			t, err := time.Parse(time.RFC3339Nano, q)
			if err != nil {
				s.writeError(ctx, huma.Error422UnprocessableEntity("since must be an RFC 3339 time or 0", &huma.ErrorDetail{
					Location: "query.since", Message: "not an RFC 3339 time or 0", Value: q}))
				return
			}
			pos.Since = t
		}
	}
	next(huma.WithValue(ctx, positionKey{}, pos))
}

// checkEventID accepts 0 and the id of an event the caller's stream
// carries, or carried before the log dropped it.
func (s *Server) checkEventID(ctx huma.Context, id uint64) error {
	if id == 0 {
		return nil
	}
	unprocessable := func(why string) error {
		return huma.Error422UnprocessableEntity("Last-Event-ID "+strconv.FormatUint(id, 10)+" "+why, &huma.ErrorDetail{
			Location: "header.Last-Event-ID", Message: why, Value: id})
	}
	stream, err := s.deps.JetStream.Stream(ctx.Context(), bus.StreamEvents)
	if err != nil {
		return huma.Error503ServiceUnavailable("live streams are not available")
	}
	info, err := stream.Info(ctx.Context())
	if err != nil {
		return huma.Error503ServiceUnavailable("live streams are not available")
	}
	if id > info.State.LastSeq {
		return unprocessable("is beyond the last event")
	}
	msg, err := stream.GetMsg(ctx.Context(), id)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil // aged out: resuming after it still misses nothing that is left
	}
	if err != nil {
		return huma.Error503ServiceUnavailable("live streams are not available")
	}
	// agents.evt.<aggregate>.<id>.<event>
	parts := strings.SplitN(msg.Subject, ".", 5)
	if len(parts) < 5 || (!slices.Contains(s.cfg.SessionStreamAggregates, parts[2]) && parts[2] != domain.AggregateChain) {
		return unprocessable("is not an event of this stream")
	}
	if sessionID := ctx.Param("id"); sessionID != "" && parts[2] == domain.AggregateChain {
		id, err := uuid.Parse(sessionID)
		env, derr := bus.DecodeEnvelope(msg.Data)
		if err != nil || derr != nil || !s.newSessionChains(ctx.Context(), id).keep(env) {
			return unprocessable("is an event of another session's chain")
		}
		return nil
	}
	if sessionID := ctx.Param("id"); sessionID != "" {
		if parts[3] != strings.ToLower(sessionID) {
			return unprocessable("is an event of another session")
		}
		return nil
	}
	env, err := bus.DecodeEnvelope(msg.Data)
	if err != nil || env.OwnerID != OwnerID(ctx.Context()) {
		return unprocessable("is not an event of your sessions")
	}
	return nil
}
