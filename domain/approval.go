package domain

import (
	"slices"
	"time"
)

// ApprovalMode says which tool uses need a person's approval. The zero
// value is invalid.
type ApprovalMode string

// The approval modes.
const (
	// ApprovalNone: every tool runs without asking (the default).
	ApprovalNone ApprovalMode = "None"
	// ApprovalAll: every tool use waits for approval.
	ApprovalAll ApprovalMode = "All"
	// ApprovalList: the tools named in the policy wait for approval.
	ApprovalList ApprovalMode = "List"
)

// PermissionTimeoutBehavior says what happens to a tool permission request
// nobody answered in time. The zero value is invalid.
type PermissionTimeoutBehavior string

// The timeout behaviours.
const (
	// TimeoutDeny denies the tool use and lets the agent go on (the
	// default: fail closed).
	TimeoutDeny PermissionTimeoutBehavior = "Deny"
	// TimeoutAllow lets the tool run.
	TimeoutAllow PermissionTimeoutBehavior = "Allow"
	// TimeoutFail fails the session.
	TimeoutFail PermissionTimeoutBehavior = "Fail"
)

// DefaultPermissionTimeout is how long a tool permission request waits.
const DefaultPermissionTimeout = 2 * time.Minute

// ToolApprovalPolicy says which tools need approval and what an
// unanswered request turns into. Templates carry a default; each session
// its own copy.
type ToolApprovalPolicy struct {
	Mode ApprovalMode `json:"mode"`
	// Tools lists the tool names that need approval when Mode is List.
	Tools []string `json:"tools,omitempty"`
	// Timeout is how long a request waits for an answer.
	Timeout time.Duration `json:"timeout"`
	// OnTimeout is what an unanswered request becomes.
	OnTimeout PermissionTimeoutBehavior `json:"onTimeout"`
}

// DefaultToolApprovalPolicy asks for nothing; if asked, it denies after
// DefaultPermissionTimeout.
func DefaultToolApprovalPolicy() ToolApprovalPolicy {
	return ToolApprovalPolicy{Mode: ApprovalNone, Timeout: DefaultPermissionTimeout, OnTimeout: TimeoutDeny}
}

// Validate checks the mode, the list and the timeout.
func (p ToolApprovalPolicy) Validate() error {
	switch p.Mode {
	case ApprovalNone, ApprovalAll:
	case ApprovalList:
		if len(p.Tools) == 0 {
			return invalid("toolApproval.tools", "must name at least one tool when mode is List")
		}
		for _, t := range p.Tools {
			if t == "" {
				return invalid("toolApproval.tools", "tool names must not be empty")
			}
		}
	default:
		return invalid("toolApproval.mode", "unknown approval mode %q", p.Mode)
	}
	if p.Timeout <= 0 {
		return invalid("toolApproval.timeout", "must be positive")
	}
	switch p.OnTimeout {
	case TimeoutDeny, TimeoutAllow, TimeoutFail:
	default:
		return invalid("toolApproval.onTimeout", "unknown timeout behaviour %q", p.OnTimeout)
	}
	return nil
}

// RequiresApproval reports whether a use of tool must wait for a person.
func (p ToolApprovalPolicy) RequiresApproval(tool string) bool {
	switch p.Mode {
	case ApprovalAll:
		return true
	case ApprovalList:
		return slices.Contains(p.Tools, tool)
	}
	return false
}

func (p ToolApprovalPolicy) clone() ToolApprovalPolicy {
	p.Tools = slices.Clone(p.Tools)
	return p
}

// PermissionRequest is a tool use waiting for approval.
type PermissionRequest struct {
	// RequestID correlates the request with the sidecar's answer.
	RequestID string `json:"requestId"`
	ToolName  string `json:"toolName"`
	// Input is the tool input, as JSON.
	Input     string    `json:"input"`
	AskedAt   time.Time `json:"askedAt"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// PermissionDecision is the answer to a tool permission request.
type PermissionDecision string

// The decisions.
const (
	PermissionAllow PermissionDecision = "allow"
	PermissionDeny  PermissionDecision = "deny"
	// PermissionPending: the request waits for a person.
	PermissionPending PermissionDecision = "pending"
)

// DefaultInputTimeout is how long a question waits for an answer.
const DefaultInputTimeout = 24 * time.Hour

// SessionTimeouts are the limits on waiting for people.
type SessionTimeouts struct {
	// Input is how long a question waits (WaitingForInput).
	Input time.Duration `json:"input"`
	// DefaultAnswer, when set, answers a question nobody answered in
	// time; otherwise the session fails.
	DefaultAnswer string `json:"defaultAnswer,omitempty"`
	// Pause is how long a session may stay Paused before it fails.
	Pause time.Duration `json:"pause"`
}

// DefaultSessionTimeouts waits 24 hours for answers and 10 minutes in pause.
func DefaultSessionTimeouts() SessionTimeouts {
	return SessionTimeouts{Input: DefaultInputTimeout, Pause: DefaultPauseTimeout}
}

// Validate checks both durations are positive.
func (t SessionTimeouts) Validate() error {
	if t.Input <= 0 {
		return invalid("timeouts.input", "must be positive")
	}
	if t.Pause <= 0 {
		return invalid("timeouts.pause", "must be positive")
	}
	if chars(t.DefaultAnswer) > MaxAnswerChars {
		return invalid("timeouts.defaultAnswer", "must be at most %d characters", MaxAnswerChars)
	}
	return nil
}
