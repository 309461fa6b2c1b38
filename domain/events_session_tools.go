package domain

import (
	"time"

	"github.com/google/uuid"
)

// ToolPermissionRequestedEvent records that a tool use waits for the owner's approval
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

// ToolPermissionGrantedEvent records that the tool may run; send `permission_response`
// with behavior allow.
type ToolPermissionGrantedEvent struct {
	SessionMeta
	RequestID string            `json:"requestId"`
	ToolName  string            `json:"toolName"`
	Message   string            `json:"message,omitempty"`
	DecidedBy PermissionDecider `json:"decidedBy"`
}

// ToolPermissionDeniedEvent records that the tool may not run; send `permission_response`
// with behavior deny and the message for the agent.
type ToolPermissionDeniedEvent struct {
	SessionMeta
	RequestID string            `json:"requestId"`
	ToolName  string            `json:"toolName"`
	Message   string            `json:"message,omitempty"`
	DecidedBy PermissionDecider `json:"decidedBy"`
}

// ToolPermissionTimedOutEvent records that nobody answered a permission request in time.
type ToolPermissionTimedOutEvent struct {
	SessionMeta
	RequestID string                    `json:"requestId"`
	ToolName  string                    `json:"toolName"`
	Behavior  PermissionTimeoutBehavior `json:"behavior"`
}

// AgentMessageRecordedEvent records that a classified message was added to the
// session's (or a subagent's) transcript.
type AgentMessageRecordedEvent struct {
	SessionMeta
	MessageID  uuid.UUID          `json:"messageId"`
	Source     AgentMessageSource `json:"source"`
	SubAgentID *uuid.UUID         `json:"subAgentId,omitempty"`
	Timestamp  time.Time          `json:"timestamp"`
}

// ToolCallStartedEvent records that the agent invoked a tool.
type ToolCallStartedEvent struct {
	SessionMeta
	ToolCallID uuid.UUID  `json:"toolCallId"`
	ToolName   string     `json:"toolName"`
	SubAgentID *uuid.UUID `json:"subAgentId,omitempty"`
}

// ToolCallCompletedEvent records that the tool's result was attached to its call.
type ToolCallCompletedEvent struct {
	SessionMeta
	ToolCallID uuid.UUID      `json:"toolCallId"`
	ToolName   string         `json:"toolName"`
	Status     ToolCallStatus `json:"status"`
	SubAgentID *uuid.UUID     `json:"subAgentId,omitempty"`
	IsError    bool           `json:"isError"`
}

// SubAgentSessionStartedEvent records that the agent spawned a subagent.
type SubAgentSessionStartedEvent struct {
	SessionMeta
	// ParentSessionID is the session that spawned the subagent (= SessionID).
	ParentSessionID uuid.UUID `json:"parentSessionId"`
	SubAgentID      uuid.UUID `json:"subAgentId"`
	ModelID         string    `json:"modelId"`
}

// SubAgentSessionCompletedEvent records that a subagent finished.
type SubAgentSessionCompletedEvent struct {
	SessionMeta
	ParentSessionID uuid.UUID `json:"parentSessionId"`
	SubAgentID      uuid.UUID `json:"subAgentId"`
}

// SubAgentSessionFailedEvent records that a subagent failed.
type SubAgentSessionFailedEvent struct {
	SessionMeta
	ParentSessionID uuid.UUID     `json:"parentSessionId"`
	SubAgentID      uuid.UUID     `json:"subAgentId"`
	FailureReason   FailureReason `json:"failureReason"`
}

// EventType returns "tool_permission_requested".
func (ToolPermissionRequestedEvent) EventType() string { return "tool_permission_requested" }

// EventType returns "tool_permission_granted".
func (ToolPermissionGrantedEvent) EventType() string { return "tool_permission_granted" }

// EventType returns "tool_permission_denied".
func (ToolPermissionDeniedEvent) EventType() string { return "tool_permission_denied" }

// EventType returns "tool_permission_timed_out".
func (ToolPermissionTimedOutEvent) EventType() string { return "tool_permission_timed_out" }

// EventType returns "agent_message_recorded".
func (AgentMessageRecordedEvent) EventType() string { return "agent_message_recorded" }

// EventType returns "tool_call_started".
func (ToolCallStartedEvent) EventType() string { return "tool_call_started" }

// EventType returns "tool_call_completed".
func (ToolCallCompletedEvent) EventType() string { return "tool_call_completed" }

// EventType returns "sub_agent_session_started".
func (SubAgentSessionStartedEvent) EventType() string { return "sub_agent_session_started" }

// EventType returns "sub_agent_session_completed".
func (SubAgentSessionCompletedEvent) EventType() string { return "sub_agent_session_completed" }

// EventType returns "sub_agent_session_failed".
func (SubAgentSessionFailedEvent) EventType() string { return "sub_agent_session_failed" }
