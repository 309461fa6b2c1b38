package domain

import (
	"time"

	"github.com/google/uuid"
)

// Pause suspends a running session: RequestPause (Running -> Pausing)
// sends the sidecar a `pause`, and its pause_ack confirms it
// (ConfirmPaused: Pausing -> Paused). Reaching the budget's hard cap asks
// for a pause too. A session left Paused longer than Timeouts().Pause
// fails (ExpirePause). This file holds pause's slice of the session's
// tables; the two-phase controls' generic code reads it from there.

// The operations of a pause.
const (
	OpRequestPause  Operation = "RequestPause"
	OpConfirmPaused Operation = "ConfirmPaused"
	OpExpirePause   Operation = "ExpirePause"
)

// SidecarPause is the sidecar command of a pause.
const SidecarPause SidecarCommand = "pause"

// DefaultPauseTimeout is how long a session may stay paused.
const DefaultPauseTimeout = 10 * time.Minute

// PauseReason says who asked for a pause.
type PauseReason string

// The pause reasons.
const (
	PauseByUser          PauseReason = "user"
	PauseBudgetExhausted PauseReason = "budget_exhausted"
)

// SessionPauseRequestedEvent records the move Running -> Pausing; send `pause`.
type SessionPauseRequestedEvent struct {
	SessionMeta
	Reason PauseReason `json:"reason"`
	// CommandID is the id of the `pause` sent to the sidecar; its ack echoes it.
	CommandID uuid.UUID `json:"commandId"`
}

// SessionPausedEvent records the move Pausing -> Paused (pause_ack). ExpiresAt is when the
// pause times out.
type SessionPausedEvent struct {
	SessionMeta
	ExpiresAt time.Time `json:"expiresAt"`
}

// SessionPauseTimedOutEvent records that the session stayed paused too long and fails.
type SessionPauseTimedOutEvent struct {
	SessionMeta
	PausedAt time.Time `json:"pausedAt"`
}

// EventType returns "session_pause_requested".
func (SessionPauseRequestedEvent) EventType() string { return "session_pause_requested" }

// EventType returns "session_paused".
func (SessionPausedEvent) EventType() string { return "session_paused" }

// EventType returns "session_pause_timed_out".
func (SessionPauseTimedOutEvent) EventType() string { return "session_pause_timed_out" }

// pause is the pause's slice of the two-phase controls' tables.
var pause = control{
	moves: func(move moveFunc) {
		move(OpRequestPause, one(StatusRunning), StatusPausing, CaseNone)
		move(OpConfirmPaused, one(StatusPausing), StatusPaused, CaseNone)
		move(OpExpirePause, one(StatusPaused), StatusFailed, CaseNone)
	},
	events: []eventStatus{{SessionPauseRequestedEvent{}, StatusPausing}, {SessionPausedEvent{}, StatusPaused}},
	wait: &timedWait{StatusPaused, func(s *AgentSession) (time.Time, bool) {
		if s.pausedAt == nil {
			return time.Time{}, false
		}
		return s.pausedAt.Add(s.timeouts.Pause), true
	}, (*AgentSession).ExpirePause},
	budgetStop: func(s *AgentSession, now time.Time) {
		s.raise(SessionPauseRequestedEvent{SessionMeta: s.meta(now), Reason: PauseBudgetExhausted, CommandID: s.awaitAck(SidecarPause)})
	},
}

// RequestPause asks the sidecar to suspend execution: Running -> Pausing.
func (s *AgentSession) RequestPause(now time.Time) error {
	to, err := s.target(OpRequestPause, CaseNone)
	if err != nil {
		return err
	}
	s.moveTo(to, now)
	s.raise(SessionPauseRequestedEvent{SessionMeta: s.meta(now), Reason: PauseByUser, CommandID: s.awaitAck(SidecarPause)})
	return nil
}

// ConfirmPaused records the pause_ack of the awaited pause (commandID):
// Pausing -> Paused. The pause times out after Timeouts().Pause (see
// ExpirePause).
func (s *AgentSession) ConfirmPaused(commandID uuid.UUID, now time.Time) error {
	if err := s.checkAck(OpConfirmPaused, SidecarPause, commandID); err != nil {
		return err
	}
	to, err := s.target(OpConfirmPaused, CaseNone)
	if err != nil {
		return err
	}
	s.acked(SidecarPause)
	s.moveTo(to, now)
	s.raise(SessionPausedEvent{SessionMeta: s.meta(now), ExpiresAt: now.UTC().Add(s.timeouts.Pause)})
	return nil
}

// ExpirePause fails a session paused longer than Timeouts().Pause
// (Paused -> Failed, reason Timeout): a paused sidecar holds a pool slot
// and resources, and a failed session can still be retried.
func (s *AgentSession) ExpirePause(now time.Time) error {
	if err := s.allow(OpExpirePause); err != nil {
		return err
	}
	if s.pausedAt == nil || now.Before(s.pausedAt.Add(s.timeouts.Pause)) {
		return s.refuse(OpExpirePause, ErrNoTimeoutDue)
	}
	to, err := s.target(OpExpirePause, CaseNone)
	if err != nil {
		return err
	}
	pausedAt := *s.pausedAt
	s.raise(SessionPauseTimedOutEvent{SessionMeta: s.meta(now), PausedAt: pausedAt})
	s.fail(to, FailureTimeout, "the session stayed paused too long", now)
	return nil
}

// PausedAt returns when the current pause began, or nil.
func (s *AgentSession) PausedAt() *time.Time { return clonePtr(s.pausedAt) }
