package domain

import (
	"time"

	"github.com/google/uuid"
)

// ToolPermissionRequestedEvent: a tool use waits for the owner's approval
// (Running -> WaitingForApproval). ExpiresAt is when the policy's timeout
// behaviour applies.
type ToolPermissionRequestedEvent struct {
	SessionMeta
	RequestID string    `json:"requestId"`
	ToolName  string    `json:"toolName"`
	Input     string    `json:"input"`
	AskedAt   time.Time `json:"askedAt"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// PermissionDecider says who decided a permission request.
type PermissionDecider string

// The deciders.
const (
	// DecidedByUser: the owner answered.
	DecidedByUser PermissionDecider = "user"
	// DecidedByPolicy: the policy needs no approval for the tool.
	DecidedByPolicy PermissionDecider = "policy"
	// DecidedByTimeout: nobody answered in time.
	DecidedByTimeout PermissionDecider = "timeout"
	// DecidedBySessionStopping: the session is being interrupted, paused or cancelled.
	DecidedBySessionStopping PermissionDecider = "session_stopping"
)

// ToolPermissionGrantedEvent: the tool may run; send `permission_response`
// with behavior allow.
type ToolPermissionGrantedEvent struct {
	SessionMeta
	RequestID string            `json:"requestId"`
	ToolName  string            `json:"toolName"`
	Message   string            `json:"message,omitempty"`
	DecidedBy PermissionDecider `json:"decidedBy"`
}

// ToolPermissionDeniedEvent: the tool may not run; send `permission_response`
// with behavior deny and the message for the agent.
type ToolPermissionDeniedEvent struct {
	SessionMeta
	RequestID string            `json:"requestId"`
	ToolName  string            `json:"toolName"`
	Message   string            `json:"message,omitempty"`
	DecidedBy PermissionDecider `json:"decidedBy"`
}

// ToolPermissionTimedOutEvent: nobody answered a permission request in time.
type ToolPermissionTimedOutEvent struct {
	SessionMeta
	RequestID string                    `json:"requestId"`
	ToolName  string                    `json:"toolName"`
	Behavior  PermissionTimeoutBehavior `json:"behavior"`
}

// AgentMessageRecordedEvent: a classified message was added to the
// session's (or a subagent's) transcript.
type AgentMessageRecordedEvent struct {
	SessionMeta
	MessageID  uuid.UUID          `json:"messageId"`
	Source     AgentMessageSource `json:"source"`
	SubAgentID *uuid.UUID         `json:"subAgentId,omitempty"`
	Timestamp  time.Time          `json:"timestamp"`
}

// ToolCallStartedEvent: the agent invoked a tool.
type ToolCallStartedEvent struct {
	SessionMeta
	ToolCallID uuid.UUID  `json:"toolCallId"`
	ToolName   string     `json:"toolName"`
	SubAgentID *uuid.UUID `json:"subAgentId,omitempty"`
}

// ToolCallCompletedEvent: the tool's result was attached to its call.
type ToolCallCompletedEvent struct {
	SessionMeta
	ToolCallID uuid.UUID      `json:"toolCallId"`
	ToolName   string         `json:"toolName"`
	Status     ToolCallStatus `json:"status"`
	SubAgentID *uuid.UUID     `json:"subAgentId,omitempty"`
	IsError    bool           `json:"isError"`
}

// SubAgentSessionStartedEvent: the agent spawned a subagent. SessionID is
// the parent session.
type SubAgentSessionStartedEvent struct {
	SessionMeta
	SubAgentID uuid.UUID `json:"subAgentId"`
	ModelID    string    `json:"modelId"`
}

// SubAgentSessionCompletedEvent: a subagent finished.
type SubAgentSessionCompletedEvent struct {
	SessionMeta
	SubAgentID uuid.UUID `json:"subAgentId"`
}

// SubAgentSessionFailedEvent: a subagent failed.
type SubAgentSessionFailedEvent struct {
	SessionMeta
	SubAgentID    uuid.UUID     `json:"subAgentId"`
	FailureReason FailureReason `json:"failureReason"`
}

// EventType names.
func (ToolPermissionRequestedEvent) EventType() string  { return "tool_permission_requested" }
func (ToolPermissionGrantedEvent) EventType() string    { return "tool_permission_granted" }
func (ToolPermissionDeniedEvent) EventType() string     { return "tool_permission_denied" }
func (ToolPermissionTimedOutEvent) EventType() string   { return "tool_permission_timed_out" }
func (AgentMessageRecordedEvent) EventType() string     { return "agent_message_recorded" }
func (ToolCallStartedEvent) EventType() string          { return "tool_call_started" }
func (ToolCallCompletedEvent) EventType() string        { return "tool_call_completed" }
func (SubAgentSessionStartedEvent) EventType() string   { return "sub_agent_session_started" }
func (SubAgentSessionCompletedEvent) EventType() string { return "sub_agent_session_completed" }
func (SubAgentSessionFailedEvent) EventType() string    { return "sub_agent_session_failed" }
