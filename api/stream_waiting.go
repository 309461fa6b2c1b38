package api

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/feed"
)

// StreamWaiting is what the session waits for now (SSE event `waiting`),
// derived from its state and activity as its detail's waitingFor is. It is
// sent once the stream is live and whenever it changes; it has no SSE id,
// since it is not an event of the log but the state the log led to: a
// client that resumes gets the current one again.
type StreamWaiting struct {
	SessionID  string      `json:"sessionId" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	WaitingFor *WaitingFor `json:"waitingFor,omitempty" doc:"What the session waits for; absent once it waits for nothing."`
}

// waitingFeed tells one session stream's client what the session waits
// for when that may have changed.
type waitingFeed struct {
	s       *Server
	session uuid.UUID
	owner   uuid.UUID
	last    string
}

// changes reports whether env may change what the session waits for: a
// change of the session itself, or a tool call starting or ending.
func (w *waitingFeed) changes(env bus.Envelope) bool {
	switch env.Aggregate {
	case domain.AggregateSession:
		return true
	case feed.Aggregate:
		return env.Type == feed.KindToolCall || env.Type == feed.KindToolResult
	}
	return false
}

// next returns the message to send when what the session waits for
// differs from what the client was last told, or nil.
func (w *waitingFeed) next(ctx context.Context) (*StreamWaiting, error) {
	snap, err := w.s.deps.Queries.Session(ctx, w.owner, w.session)
	if err != nil {
		return nil, err
	}
	var d SessionDetail
	if err := w.s.withWaitingFor(ctx, snap, &d); err != nil {
		return nil, err
	}
	msg := &StreamWaiting{SessionID: w.session.String(), WaitingFor: d.WaitingFor}
	raw, err := json.Marshal(msg)
	if err != nil || string(raw) == w.last {
		return nil, err
	}
	w.last = string(raw)
	return msg, nil
}
