package domain

import (
	"time"
)

// The session decides what an expired wait does; a timeout worker only
// tells it the time. NextDeadline says when to call back; ExpireTimeouts
// applies whichever wait has expired.

// A timedWait is a status a session may wait too long in: when its wait
// expires (ok false while it waits for nothing), and what expiring does.
type timedWait struct {
	status   SessionStatus
	deadline func(s *AgentSession) (deadline time.Time, ok bool)
	expire   func(s *AgentSession, now time.Time) error
}

// timedWaits are the statuses that time out: the open question, the
// pending tool permission, and the controls' (a pause).
var timedWaits = func() map[SessionStatus]timedWait {
	waits := map[SessionStatus]timedWait{
		StatusWaitingForInput: {StatusWaitingForInput, func(s *AgentSession) (time.Time, bool) {
			if s.question == nil {
				return time.Time{}, false
			}
			return s.question.ExpiresAt, true
		}, (*AgentSession).ExpireQuestion},
		StatusWaitingForApproval: {StatusWaitingForApproval, func(s *AgentSession) (time.Time, bool) {
			if s.permission == nil {
				return time.Time{}, false
			}
			return s.permission.ExpiresAt, true
		}, func(s *AgentSession, now time.Time) error {
			if s.permission == nil {
				return s.refuse("ExpireTimeouts", ErrNoTimeoutDue)
			}
			return s.ExpireToolPermission(now)
		}},
	}
	for _, c := range controls {
		if c.wait != nil {
			waits[c.wait.status] = *c.wait
		}
	}
	return waits
}()

// NextDeadline returns when the wait the session is in expires. ok is
// false when the session waits for nothing that times out.
func (s *AgentSession) NextDeadline() (deadline time.Time, ok bool) {
	if w, waits := timedWaits[s.status]; waits {
		return w.deadline(s)
	}
	return time.Time{}, false
}

// ExpireTimeouts applies the expired wait, if any, by calling the
// expiry of the status the session waits in (ExpireQuestion,
// ExpireToolPermission, ...). It returns a TransitionError with
// ErrNoTimeoutDue when nothing has expired, so a worker that calls too
// early or too late (the session moved on) can acknowledge and forget.
func (s *AgentSession) ExpireTimeouts(now time.Time) error {
	if w, waits := timedWaits[s.status]; waits {
		return w.expire(s, now)
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
