package domain

import (
	"time"

	"github.com/google/uuid"
)

// MaxToolNameChars bounds tool names.
const MaxToolNameChars = 100

// ToolCallStatus is the state of a tool call. The zero value is invalid.
type ToolCallStatus string

// The tool call statuses.
const (
	ToolCallPending ToolCallStatus = "Pending"
	ToolCallSuccess ToolCallStatus = "Success"
	ToolCallError   ToolCallStatus = "Error"
)

// ToolResult is what a tool returned. It belongs to its ToolCall and is
// never a message of the transcript.
type ToolResult struct {
	Content string `json:"content"`
	IsError bool   `json:"isError"`
}

// ToolCall is one tool invocation by the agent or a subagent, with its
// result once it returns: Pending -> Success or Pending -> Error, once.
type ToolCall struct {
	id          uuid.UUID
	sessionID   uuid.UUID
	subAgentID  *uuid.UUID
	toolName    string
	input       string
	result      *ToolResult
	status      ToolCallStatus
	startedAt   time.Time
	completedAt *time.Time
}

// NewToolCall returns a Pending call. The input must be valid JSON.
func NewToolCall(id, sessionID uuid.UUID, subAgentID *uuid.UUID, toolName, input string, now time.Time) (*ToolCall, error) {
	if err := requireID("toolCallId", id); err != nil {
		return nil, err
	}
	if err := requireID("sessionId", sessionID); err != nil {
		return nil, err
	}
	if subAgentID != nil {
		if err := requireID("subAgentId", *subAgentID); err != nil {
			return nil, err
		}
	}
	name, err := requireText("toolName", toolName, 1, MaxToolNameChars)
	if err != nil {
		return nil, err
	}
	if err := requireJSON("input", input); err != nil {
		return nil, err
	}
	return &ToolCall{id: id, sessionID: sessionID, subAgentID: clonePtr(subAgentID), toolName: name, input: input,
		status: ToolCallPending, startedAt: now.UTC()}, nil
}

// ToolCallSnapshot is a stored tool call.
type ToolCallSnapshot struct {
	ID          uuid.UUID      `json:"id"`
	SessionID   uuid.UUID      `json:"sessionId"`
	SubAgentID  *uuid.UUID     `json:"subAgentId,omitempty"`
	ToolName    string         `json:"toolName"`
	Input       string         `json:"input"`
	Result      *ToolResult    `json:"result,omitempty"`
	Status      ToolCallStatus `json:"status"`
	StartedAt   time.Time      `json:"startedAt"`
	CompletedAt *time.Time     `json:"completedAt,omitempty"`
}

// Snapshot returns the call as plain values.
func (c *ToolCall) Snapshot() ToolCallSnapshot {
	return ToolCallSnapshot{ID: c.id, SessionID: c.sessionID, SubAgentID: clonePtr(c.subAgentID), ToolName: c.toolName,
		Input: c.input, Result: clonePtr(c.result), Status: c.status, StartedAt: c.startedAt, CompletedAt: clonePtr(c.completedAt)}
}

// UnmarshalToolCallFromDatabase rebuilds a stored call.
func UnmarshalToolCallFromDatabase(s ToolCallSnapshot) (*ToolCall, error) {
	if s.Status != ToolCallPending && s.Status != ToolCallSuccess && s.Status != ToolCallError {
		return nil, invalid("status", "unknown tool call status %q", s.Status)
	}
	if (s.Status == ToolCallPending) != (s.Result == nil) {
		return nil, invalid("result", "a result is set exactly when the call is no longer Pending")
	}
	c, err := NewToolCall(s.ID, s.SessionID, s.SubAgentID, s.ToolName, s.Input, s.StartedAt)
	if err != nil {
		return nil, err
	}
	c.startedAt, c.status, c.result, c.completedAt = s.StartedAt, s.Status, clonePtr(s.Result), clonePtr(s.CompletedAt)
	return c, nil
}

// Complete attaches the result: Success, or Error when the result says
// so. A call completes once.
func (c *ToolCall) Complete(result ToolResult, now time.Time) error {
	if c.status != ToolCallPending {
		return &TransitionError{Aggregate: "ToolCall", Operation: "Complete", Status: string(c.status), Reason: ErrInvalidTransition}
	}
	if result.Content == "" {
		return invalid("result", "must not be empty")
	}
	t := now.UTC()
	c.result, c.completedAt, c.status = &result, &t, ToolCallSuccess
	if result.IsError {
		c.status = ToolCallError
	}
	return nil
}

// ID returns the call id.
func (c *ToolCall) ID() uuid.UUID { return c.id }

// SessionID returns the session the call belongs to.
func (c *ToolCall) SessionID() uuid.UUID { return c.sessionID }

// SubAgentID returns the subagent that made the call, or nil.
func (c *ToolCall) SubAgentID() *uuid.UUID { return clonePtr(c.subAgentID) }

// ToolName returns the tool invoked.
func (c *ToolCall) ToolName() string { return c.toolName }

// Input returns the tool input as JSON.
func (c *ToolCall) Input() string { return c.input }

// Result returns the result, or nil while Pending.
func (c *ToolCall) Result() *ToolResult { return clonePtr(c.result) }

// Status returns the call's status.
func (c *ToolCall) Status() ToolCallStatus { return c.status }

// StartedAt returns when the call began.
func (c *ToolCall) StartedAt() time.Time { return c.startedAt }

// CompletedAt returns when the result arrived, or nil.
func (c *ToolCall) CompletedAt() *time.Time { return clonePtr(c.completedAt) }
