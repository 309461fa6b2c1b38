package domain

import (
	"slices"
	"time"

	"github.com/google/uuid"
)

// SubAgentSession is a subagent the session's agent spawned: a child
// entity with its own transcript and tool calls, which never mix with the
// parent's. Its status is Running, then Completed or Failed for good.
type SubAgentSession struct {
	id              uuid.UUID
	parentSessionID uuid.UUID
	modelID         string
	objective       string
	messages        []AgentMessage
	toolCalls       []*ToolCall
	status          SessionStatus
	failureReason   FailureReason
	startedAt       time.Time
	completedAt     *time.Time
}

// NewSubAgentSession returns a Running subagent of parentSessionID.
func NewSubAgentSession(id, parentSessionID uuid.UUID, modelID, objective string, now time.Time) (*SubAgentSession, error) {
	if err := requireID("subAgentId", id); err != nil {
		return nil, err
	}
	if err := requireID("parentSessionId", parentSessionID); err != nil {
		return nil, err
	}
	model, err := requireText("modelId", modelID, 1, 200)
	if err != nil {
		return nil, err
	}
	objective, err = optionalText("objective", objective, 0)
	if err != nil {
		return nil, err
	}
	return &SubAgentSession{id: id, parentSessionID: parentSessionID, modelID: model, objective: objective,
		status: StatusRunning, startedAt: now.UTC()}, nil
}

// SubAgentSessionSnapshot is a stored subagent (without its transcript,
// which is stored as messages and tool calls).
type SubAgentSessionSnapshot struct {
	ID              uuid.UUID     `json:"id"`
	ParentSessionID uuid.UUID     `json:"parentSessionId"`
	ModelID         string        `json:"modelId"`
	Objective       string        `json:"objective"`
	Status          SessionStatus `json:"status"`
	FailureReason   FailureReason `json:"failureReason,omitempty"`
	StartedAt       time.Time     `json:"startedAt"`
	CompletedAt     *time.Time    `json:"completedAt,omitempty"`
}

// Snapshot returns the subagent as plain values.
func (a *SubAgentSession) Snapshot() SubAgentSessionSnapshot {
	return SubAgentSessionSnapshot{ID: a.id, ParentSessionID: a.parentSessionID, ModelID: a.modelID, Objective: a.objective,
		Status: a.status, FailureReason: a.failureReason, StartedAt: a.startedAt, CompletedAt: clonePtr(a.completedAt)}
}

// UnmarshalSubAgentSessionFromDatabase rebuilds a subagent and, when the
// caller loaded them, its messages and tool calls (checked to be its own).
func UnmarshalSubAgentSessionFromDatabase(s SubAgentSessionSnapshot, messages []AgentMessage, calls []*ToolCall) (*SubAgentSession, error) {
	if s.Status != StatusRunning && s.Status != StatusCompleted && s.Status != StatusFailed {
		return nil, invalid("status", "a subagent is Running, Completed or Failed, not %q", s.Status)
	}
	a, err := NewSubAgentSession(s.ID, s.ParentSessionID, s.ModelID, s.Objective, s.StartedAt)
	if err != nil {
		return nil, err
	}
	a.status, a.failureReason, a.startedAt, a.completedAt = s.Status, s.FailureReason, s.StartedAt, clonePtr(s.CompletedAt)
	for _, m := range messages {
		if err := a.checkMessage(m); err != nil {
			return nil, err
		}
	}
	for _, c := range calls {
		if err := a.checkToolCall(c); err != nil {
			return nil, err
		}
	}
	a.messages, a.toolCalls = slices.Clone(messages), slices.Clone(calls)
	return a, nil
}

func (a *SubAgentSession) refuse(op string) error {
	return &TransitionError{Aggregate: "SubAgentSession", Operation: op, Status: string(a.status), Reason: ErrInvalidTransition}
}

func (a *SubAgentSession) checkMessage(m AgentMessage) error {
	if m.Source() != SourceSubAgent || m.SubAgentID() == nil || *m.SubAgentID() != a.id || m.SessionID() != a.parentSessionID {
		return invalid("message", "a subagent holds only its own SubAgent messages")
	}
	return nil
}

func (a *SubAgentSession) checkToolCall(c *ToolCall) error {
	if c == nil || c.SubAgentID() == nil || *c.SubAgentID() != a.id || c.SessionID() != a.parentSessionID {
		return invalid("toolCall", "a subagent holds only its own tool calls")
	}
	return nil
}

// AddMessage appends one of the subagent's own messages (Running only).
func (a *SubAgentSession) AddMessage(m AgentMessage) error {
	if a.status != StatusRunning {
		return a.refuse("AddMessage")
	}
	if err := a.checkMessage(m); err != nil {
		return err
	}
	a.messages = append(a.messages, m)
	return nil
}

// AddToolCall appends one of the subagent's own tool calls (Running only).
func (a *SubAgentSession) AddToolCall(c *ToolCall) error {
	if a.status != StatusRunning {
		return a.refuse("AddToolCall")
	}
	if err := a.checkToolCall(c); err != nil {
		return err
	}
	a.toolCalls = append(a.toolCalls, c)
	return nil
}

func (a *SubAgentSession) finish(op string, to SessionStatus, reason FailureReason, now time.Time) error {
	if a.status != StatusRunning {
		return a.refuse(op)
	}
	t := now.UTC()
	a.status, a.failureReason, a.completedAt = to, reason, &t
	return nil
}

// ID returns the subagent id.
func (a *SubAgentSession) ID() uuid.UUID { return a.id }

// ParentSessionID returns the session that spawned the subagent.
func (a *SubAgentSession) ParentSessionID() uuid.UUID { return a.parentSessionID }

// ModelID returns the subagent's model.
func (a *SubAgentSession) ModelID() string { return a.modelID }

// Objective returns the task given to the subagent.
func (a *SubAgentSession) Objective() string { return a.objective }

// Messages returns the subagent's transcript.
func (a *SubAgentSession) Messages() []AgentMessage { return slices.Clone(a.messages) }

// ToolCalls returns the subagent's tool calls.
func (a *SubAgentSession) ToolCalls() []*ToolCall { return slices.Clone(a.toolCalls) }

// Status returns Running, Completed or Failed.
func (a *SubAgentSession) Status() SessionStatus { return a.status }

// FailureReason returns why the subagent failed, or "".
func (a *SubAgentSession) FailureReason() FailureReason { return a.failureReason }

// StartedAt returns when the subagent was spawned.
func (a *SubAgentSession) StartedAt() time.Time { return a.startedAt }

// CompletedAt returns when the subagent ended, or nil.
func (a *SubAgentSession) CompletedAt() *time.Time { return clonePtr(a.completedAt) }
