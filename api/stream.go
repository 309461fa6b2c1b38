package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/sse"
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/feed"
)

// SessionOwners tells whose a session is; the live stream of a session is
// shown only to its owner.
type SessionOwners interface {
	// Owner returns the owner id of the session id. It returns
	// ErrSessionNotFound, or an error of kind not_found, when there is no
	// such session.
	Owner(ctx context.Context, sessionID uuid.UUID) (ownerID string, err error)
}

// ErrSessionNotFound is returned by SessionOwners for an unknown session.
var ErrSessionNotFound = errors.New("session not found")

// StreamEvent is one domain event on a live stream (SSE event `event`).
// Its SSE id is the event's JetStream sequence in AGENTS_EVENTS.
type StreamEvent struct {
	// Type is the event's snake_case name.
	Type string `json:"type" doc:"The domain event's name, snake_case." example:"session_paused"`
	// Aggregate is the kind of aggregate the event is about.
	Aggregate string `json:"aggregate" doc:"The kind of aggregate the event is about." example:"session"`
	// AggregateID is the aggregate's id; for a session's events, the session id.
	AggregateID string `json:"aggregateId" doc:"The aggregate's id; for a session's events, the session id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	// Version is the aggregate's version after the event.
	Version int64 `json:"version" doc:"The aggregate's version after the event." example:"7"`
	// OccurredAt is when the event happened.
	OccurredAt time.Time `json:"occurredAt" doc:"When the event happened." example:"2025-01-02T15:04:05Z"`
	// Data is the event's payload.
	Data json.RawMessage `json:"data" doc:"The event's payload; its shape depends on type." example:"{\"status\":\"Paused\"}"`
}

// StreamPing is a heartbeat (SSE event `ping`), sent when the stream opens
// and whenever it has been quiet for the heartbeat interval.
type StreamPing struct {
	// Time is the server's clock.
	Time time.Time `json:"time" doc:"The server's clock when the ping was sent." example:"2025-01-02T15:04:05Z"`
}

// StreamReconnect tells the client to reconnect (SSE event `reconnect`);
// the server closes the stream right after it.
type StreamReconnect struct {
	// LastEventID is where to resume: send it as Last-Event-ID.
	LastEventID string `json:"lastEventId" doc:"The position to resume from: send it back as the Last-Event-ID header. Empty when nothing was delivered yet." example:"1042"`
	// Reason says why the stream ended.
	Reason string `json:"reason" enum:"slow_client,unavailable" doc:"Why the stream ended: slow_client when the client read slower than events arrived, unavailable when the event log could not be read." example:"slow_client"`
}

// streamEvents maps SSE event names to their payloads, for the OpenAPI
// document and the sse package: a generated client gets a union
// discriminated by the event name. Domain events (status, queue, metrics,
// requests and their resolutions, budget, handoff) are `event`; what the
// agent does has a name per kind (feed.Kinds).
var streamEvents = map[string]any{
	"event":                StreamEvent{},
	feed.KindAssistantText: feed.LiveAssistantText{},
	feed.KindToolCall:      feed.LiveToolCall{},
	feed.KindToolResult:    feed.LiveToolResult{},
	feed.KindActivity:      feed.LiveActivity{},
	feed.KindTextDelta:     feed.LiveTextDelta{},
	"waiting":              StreamWaiting{},
	"ping":                 StreamPing{},
	"reconnect":            StreamReconnect{},
}

// streamPosition is where a client asked its stream to start.
type streamPosition struct {
	// After is the position the client holds; set is false when it sent
	// none, and then the stream starts at Since or with new events.
	After uint64
	Set   bool
	// Since is the time to start from when After is not set; zero means
	// new events only, unless FromStart.
	Since     time.Time
	FromStart bool
}

// The fields every stream input has are repeated in each: Huma reads
// parameters only from exported fields.
// checkResume resolves them into the stream's position before the stream
// starts, so a bad one is a 422 rather than silence.
type sessionStreamInput struct {
	ID          string `path:"id" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	LastEventID int64  `header:"Last-Event-ID" minimum:"0" doc:"Resume after this event id (the SSE id of the last event received); the stream then misses nothing and repeats nothing. 0 means from the beginning. An id the stream has not reached, or of another session, is a 422. Browsers send it on reconnect." example:"1042"`
	Since       string `query:"since" doc:"Without Last-Event-ID: start with the events since this RFC 3339 time, or with all of them for 0, instead of only new ones." example:"2025-01-02T15:04:05Z"`
}

type allStreamInput struct {
	LastEventID int64  `header:"Last-Event-ID" minimum:"0" doc:"Resume after this event id (the SSE id of the last event received); the stream then misses nothing and repeats nothing, for every session at once, since all sessions share one order. 0 means from the beginning. An id the stream has not reached, or of another caller, is a 422. Browsers send it on reconnect." example:"1042"`
	Since       string `query:"since" doc:"Without Last-Event-ID: start with the events since this RFC 3339 time, or with all of them for 0, instead of only new ones." example:"2025-01-02T15:04:05Z"`
}

const streamDescription = "Server-Sent Events, in the order things happened. Each `event` carries one domain event of the session or its queue " +
	"(status changes, queue changes, metrics, permission, question and plan requests and their resolutions, budget warnings, handoffs) " +
	"or of the chain it is in (the chain created around it, its handoff document, the session that continues it, the chain's end); " +
	"`assistant_text`, `tool_call`, `tool_result` and `activity` carry the activity items the session records, and `text_delta` " +
	"the text the model is still writing (not recorded: the `assistant_text` that follows is). Each item's SSE id is a resumable position, " +
	"so a reconnect with `Last-Event-ID` misses nothing and repeats nothing; 0 means from the beginning. Without it the stream starts with new events, " +
	"or with those since `since` (0: all). A `ping` comes when the stream opens and after every quiet heartbeat interval. " +
	"On a session's stream, `waiting` says what the session waits for once the stream is live and whenever that changes (it has no id: a resumed stream gets the current one). " +
	"A client that reads too slowly gets a `reconnect` event with the position to resume from, and the stream closes."

// addStreamRoutes registers the live streams, which share one fan-out
// over every subject they read.
func (s *Server) addStreamRoutes(api huma.API) {
	if s.deps.JetStream != nil {
		subjects := make([]string, 0, len(s.cfg.SessionStreamAggregates)+1)
		for _, agg := range s.cfg.SessionStreamAggregates {
			subjects = append(subjects, bus.AggregateEventsFilter(agg))
		}
		s.fanout = newFanout(s.deps.JetStream, append(subjects, chainSubject))
	}
	registerSSE(api, huma.Operation{
		OperationID: "stream-session",
		Method:      http.MethodGet,
		Path:        "/api/agents/sessions/{id}/stream",
		Summary:     "Follow a session live",
		Description: "The live events of one session: status changes, activity, queue changes, metrics, questions and permission requests. " + streamDescription,
		Tags:        []string{"Streams"},
		Security:    HumanAuth,
		Errors:      []int{http.StatusUnauthorized, http.StatusNotFound, http.StatusUnprocessableEntity, http.StatusServiceUnavailable},
		Middlewares: huma.Middlewares{s.streamReady, s.requireSessionOwner, s.checkResume},
	}, streamEvents, func(ctx context.Context, in *sessionStreamInput, send sse.Sender) {
		id, err := uuid.Parse(in.ID)
		if err != nil {
			return // requireSessionOwner let it through only for the 422
		}
		subjects := make([]string, 0, len(s.cfg.SessionStreamAggregates))
		for _, agg := range s.cfg.SessionStreamAggregates {
			subjects = append(subjects, bus.InstanceEventsFilter(agg, id.String()))
		}
		subjects = append(subjects, chainSubject)
		chains := s.newSessionChains(ctx, id)
		spec := streamSpec{subjects: subjects, session: id.String(), keep: chains.keep, position: positionOf(ctx)}
		if owner, err := uuid.Parse(OwnerID(ctx)); err == nil && s.deps.Queries != nil {
			spec.waiting = s.newWaitingFeed(id, owner)
		}
		s.runStream(ctx, spec, send)
	})

	registerSSE(api, huma.Operation{
		OperationID: "stream-sessions",
		Method:      http.MethodGet,
		Path:        "/api/agents/stream",
		Summary:     "Follow all of your sessions live",
		Description: "The live events of every session of the caller, as on a taskbar. " + streamDescription,
		Tags:        []string{"Streams"},
		Security:    HumanAuth,
		Errors:      []int{http.StatusUnauthorized, http.StatusUnprocessableEntity, http.StatusServiceUnavailable},
		Middlewares: huma.Middlewares{s.streamReady, s.checkResume},
	}, streamEvents, func(ctx context.Context, in *allStreamInput, send sse.Sender) {
		subjects := make([]string, 0, len(s.cfg.SessionStreamAggregates))
		for _, agg := range s.cfg.SessionStreamAggregates {
			subjects = append(subjects, bus.AggregateEventsFilter(agg))
		}
		subjects = append(subjects, chainSubject)
		s.runStream(ctx, streamSpec{subjects: subjects, owner: OwnerID(ctx), position: positionOf(ctx)}, send)
	})
}

// streamReady answers 503 before a stream starts when there is no bus.
func (s *Server) streamReady(ctx huma.Context, next func(huma.Context)) {
	if s.deps.JetStream == nil {
		s.writeError(ctx, huma.Error503ServiceUnavailable("live streams are not available"))
		return
	}
	next(ctx)
}

// requireSessionOwner answers 404, before the stream starts, for a session
// that does not exist or is not the caller's.
func (s *Server) requireSessionOwner(ctx huma.Context, next func(huma.Context)) {
	id, err := uuid.Parse(ctx.Param("id"))
	if err != nil {
		// Not a UUID: the input validation answers 422.
		next(ctx)
		return
	}
	notFound := NewKindError(KindNotFound, "session "+id.String()+" not found")
	if s.deps.SessionOwners == nil {
		s.writeError(ctx, notFound)
		return
	}
	owner, err := s.deps.SessionOwners.Owner(ctx.Context(), id)
	if err != nil {
		var k Kinded
		if errors.Is(err, ErrSessionNotFound) || (errors.As(err, &k) && k.Kind() == KindNotFound) {
			err = notFound
		}
		s.writeError(ctx, err)
		return
	}
	if owner == "" || owner != OwnerID(ctx.Context()) {
		s.writeError(ctx, notFound)
		return
	}
	next(ctx)
}
