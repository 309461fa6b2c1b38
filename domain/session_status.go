package domain

import "slices"

// SessionStatus is where an AgentSession is in its lifecycle. The zero
// value is invalid.
type SessionStatus string

// The fifteen session statuses.
const (
	// StatusQueued: created, waiting for a pool slot; no sidecar yet.
	StatusQueued SessionStatus = "Queued"
	// StatusRunning: a turn is in progress.
	StatusRunning SessionStatus = "Running"
	// StatusInterrupting: an interrupt was requested; waiting for the ack.
	StatusInterrupting SessionStatus = "Interrupting"
	// StatusInterrupted: the turn was stopped; a follow-up starts the next one.
	StatusInterrupted SessionStatus = "Interrupted"
	// StatusPausing: a pause was requested; waiting for the ack.
	StatusPausing SessionStatus = "Pausing"
	// StatusPaused: execution is suspended until resumed (or the pause times out).
	StatusPaused SessionStatus = "Paused"
	// StatusResuming: a resume was requested; waiting for the ack.
	StatusResuming SessionStatus = "Resuming"
	// StatusCancelling: a stop was requested; waiting for the ack.
	StatusCancelling SessionStatus = "Cancelling"
	// StatusCancelled: stopped for good (terminal).
	StatusCancelled SessionStatus = "Cancelled"
	// StatusWaitingForInput: the agent asked the user a question.
	StatusWaitingForInput SessionStatus = "WaitingForInput"
	// StatusWaitingForApproval: a plan or a tool use waits for the user's decision.
	StatusWaitingForApproval SessionStatus = "WaitingForApproval"
	// StatusIdle: the normal resting state after a turn; accepts follow-ups.
	StatusIdle SessionStatus = "Idle"
	// StatusContextExhausted: the context window is full; the work continues
	// in a new session of the chain (terminal for input).
	StatusContextExhausted SessionStatus = "ContextExhausted"
	// StatusCompleted: explicitly closed or approved (terminal).
	StatusCompleted SessionStatus = "Completed"
	// StatusFailed: failed or rejected (terminal, but Retry may queue it again).
	StatusFailed SessionStatus = "Failed"
)

// AllSessionStatuses lists every status, in lifecycle order.
var allSessionStatuses = []SessionStatus{
	StatusQueued, StatusRunning,
	StatusInterrupting, StatusInterrupted,
	StatusPausing, StatusPaused, StatusResuming,
	StatusCancelling, StatusCancelled,
	StatusWaitingForInput, StatusWaitingForApproval,
	StatusIdle, StatusContextExhausted, StatusCompleted, StatusFailed,
}

// AllSessionStatuses returns every status, in lifecycle order.
func AllSessionStatuses() []SessionStatus { return slices.Clone(allSessionStatuses) }

// ParseSessionStatus returns the status named s (as written by String).
func ParseSessionStatus(s string) (SessionStatus, error) {
	st := SessionStatus(s)
	if !st.IsValid() {
		return "", invalid("status", "unknown session status %q", s)
	}
	return st, nil
}

// IsValid reports whether s is one of the fifteen statuses.
func (s SessionStatus) IsValid() bool { return slices.Contains(allSessionStatuses, s) }

// String returns the status name.
func (s SessionStatus) String() string { return string(s) }

// IsTerminal reports the statuses that end a session's run: Cancelled,
// Completed, ContextExhausted and Failed. (Failed may still be retried.)
func (s SessionStatus) IsTerminal() bool {
	switch s {
	case StatusCancelled, StatusCompleted, StatusContextExhausted, StatusFailed:
		return true
	}
	return false
}

// IsIntermediate reports the statuses that wait for a sidecar
// acknowledgement; they refuse a second lifecycle request.
func (s SessionStatus) IsIntermediate() bool {
	switch s {
	case StatusInterrupting, StatusPausing, StatusResuming, StatusCancelling:
		return true
	}
	return false
}

// HasSidecar reports the statuses in which a sidecar process exists for
// the session: every status after Start and before a terminal one. These
// are the sessions that hold a SessionPool slot.
func (s SessionStatus) HasSidecar() bool {
	return s.IsValid() && s != StatusQueued && !s.IsTerminal()
}

// AcceptsMessages reports whether a message may be enqueued for a session
// in this status: not once it ended (terminal) or is being stopped.
func (s SessionStatus) AcceptsMessages() bool {
	return s.IsValid() && !s.IsTerminal() && s != StatusCancelling
}

// PoolSlotStatuses returns the statuses whose sessions hold a pool slot,
// for the query that counts a user's active sessions.
func PoolSlotStatuses() []SessionStatus {
	var out []SessionStatus
	for _, s := range allSessionStatuses {
		if s.HasSidecar() {
			out = append(out, s)
		}
	}
	return out
}
