package domain

import (
	"time"
)

// The session decides what an expired wait does; a timeout worker only
// tells it the time. NextDeadline says when to call back; ExpireTimeouts
// applies whichever wait has expired.

// NextDeadline returns when the wait the session is in expires: the open
// question, the pending tool permission, or the pause. ok is false when
// the session waits for nothing that times out.
func (s *AgentSession) NextDeadline() (deadline time.Time, ok bool) {
	switch {
	case s.status == StatusWaitingForInput && s.question != nil:
		return s.question.ExpiresAt, true
	case s.status == StatusWaitingForApproval && s.permission != nil:
		return s.permission.ExpiresAt, true
	case s.status == StatusPaused && s.pausedAt != nil:
		return s.pausedAt.Add(s.timeouts.Pause), true
	}
	return time.Time{}, false
}

// ExpireTimeouts applies the expired wait, if any, by calling
// ExpireQuestion, ExpireToolPermission or ExpirePause. It returns a
// TransitionError with ErrNoTimeoutDue when nothing has expired, so a
// worker that calls too early or too late (the session moved on) can
// acknowledge and forget.
func (s *AgentSession) ExpireTimeouts(now time.Time) error {
	switch s.status {
	case StatusWaitingForInput:
		return s.ExpireQuestion(now)
	case StatusWaitingForApproval:
		if s.permission != nil {
			return s.ExpireToolPermission(now)
		}
	case StatusPaused:
		return s.ExpirePause(now)
	}
	return s.refuse("ExpireTimeouts", ErrNoTimeoutDue)
}

// ExpireQuestion handles an unanswered question once it expired: with a
// configured default answer the session goes on with it
// (WaitingForInput -> Running), otherwise it fails with reason Timeout.
func (s *AgentSession) ExpireQuestion(now time.Time) error {
	if err := s.allow(OpExpireQuestion); err != nil {
		return err
	}
	if s.question == nil || now.Before(s.question.ExpiresAt) {
		return s.refuse(OpExpireQuestion, ErrNoTimeoutDue)
	}
	answer := s.timeouts.DefaultAnswer
	c := CaseNoDefaultAnswer
	if answer != "" {
		c = CaseDefaultAnswer
	}
	to, err := s.target(OpExpireQuestion, c)
	if err != nil {
		return err
	}
	if err := s.guardBudget(OpExpireQuestion, to); err != nil {
		return err
	}
	s.raise(SessionInputTimedOutEvent{SessionMeta: s.meta(now), DefaultAnswerUsed: answer != ""})
	if to == StatusFailed {
		s.fail(to, FailureTimeout, "nobody answered the question in time", now)
		return nil
	}
	s.moveTo(to, now)
	s.raise(SessionInputReceivedEvent{SessionMeta: s.meta(now), Answer: answer, ByTimeout: true})
	return nil
}

// ExpireToolPermission handles a tool permission request nobody answered
// in time, as the policy says: deny it (the default), allow it, or fail
// the session.
func (s *AgentSession) ExpireToolPermission(now time.Time) error {
	if err := s.allow(OpExpireToolPermission); err != nil {
		return err
	}
	if s.permission == nil || now.Before(s.permission.ExpiresAt) {
		return s.refuse(OpExpireToolPermission, ErrNoTimeoutDue)
	}
	behavior := s.toolApproval.OnTimeout
	c := map[PermissionTimeoutBehavior]Case{TimeoutDeny: CaseTimeoutDeny, TimeoutAllow: CaseTimeoutAllow, TimeoutFail: CaseTimeoutFail}[behavior]
	to, err := s.target(OpExpireToolPermission, c)
	if err != nil {
		return err
	}
	if err := s.guardBudget(OpExpireToolPermission, to); err != nil {
		return err
	}
	req := *s.permission
	s.raise(ToolPermissionTimedOutEvent{SessionMeta: s.meta(now), RequestID: req.RequestID, ToolName: req.ToolName, Behavior: behavior})
	switch behavior {
	case TimeoutFail:
		s.fail(to, FailureTimeout, "nobody answered the permission request for "+req.ToolName+" in time", now)
	case TimeoutAllow:
		s.resolvePermission(to, PermissionAllow, "", DecidedByTimeout, now)
	default:
		s.resolvePermission(to, PermissionDeny, "nobody approved the tool use in time", DecidedByTimeout, now)
	}
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
