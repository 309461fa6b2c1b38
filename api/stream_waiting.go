package api

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/feed"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres/queries"
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
//
// The running tool call is followed from the stream's own tool_call and
// tool_result items, not read back from the activity: the activity is
// written by another worker, which may not have recorded a call yet when
// its item reaches the stream, and nothing would tell the client again
// until the call ends. The activity is read only until the stream has
// shown a tool item.
type waitingFeed struct {
	session  uuid.UUID
	snapshot func(context.Context) (domain.AgentSessionSnapshot, error)
	recorded func(context.Context) (*queries.RunningTool, error)

	// followed is set once the stream showed a tool item of the session's
	// own agent; from then on running is what it showed.
	followed bool
	running  *queries.RunningTool
	last     string
}

func (s *Server) newWaitingFeed(session, owner uuid.UUID) *waitingFeed {
	return &waitingFeed{
		session: session,
		snapshot: func(ctx context.Context) (domain.AgentSessionSnapshot, error) {
			return s.deps.Queries.Session(ctx, owner, session)
		},
		recorded: func(ctx context.Context) (*queries.RunningTool, error) {
			return s.deps.Queries.RunningTool(ctx, session)
		},
	}
}

// observe follows the session's running tool call through env. Only the
// latest call counts, as in the recorded activity; a subagent's calls
// never hold the session up.
func (w *waitingFeed) observe(env bus.Envelope) {
	if env.Aggregate != feed.Aggregate {
		return
	}
	switch env.Type {
	case feed.KindToolCall:
		var c feed.LiveToolCall
		if json.Unmarshal(env.Data, &c) != nil || c.SubAgentID != "" {
			return
		}
		input, _ := json.Marshal(c.Input)
		w.followed = true
		w.running = &queries.RunningTool{ToolUseID: c.ToolUseID, ToolName: c.ToolName, Input: string(input), StartedAt: c.OccurredAt}
	case feed.KindToolResult:
		var r feed.LiveToolResult
		if json.Unmarshal(env.Data, &r) != nil || r.SubAgentID != "" {
			return
		}
		if w.running != nil && r.ToolUseID == w.running.ToolUseID {
			w.followed, w.running = true, nil
		}
	}
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
	snap, err := w.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	if working[snap.Status] && !w.followed {
		if w.running, err = w.recorded(ctx); err != nil {
			return nil, err
		}
	}
	running := w.running
	if !working[snap.Status] {
		running = nil
	}
	msg := &StreamWaiting{SessionID: w.session.String(), WaitingFor: waitingForOf(snap, running)}
	raw, err := json.Marshal(msg)
	if err != nil || string(raw) == w.last {
		return nil, err
	}
	w.last = string(raw)
	return msg, nil
}
