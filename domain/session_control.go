package domain

import (
	"time"

	"github.com/google/uuid"
)

// The lifecycle requests are two-phase: the request moves the session to
// an intermediate status and raises an event the reactions turn into a
// sidecar command; the sidecar's ack confirms the final status. The
// intermediate status is what refuses a duplicate request.

// A control is one two-phase control's slice of the session's tables;
// the generic code reads them from here. Each field is optional.
type control struct {
	// moves adds the control's moves to the transition table.
	moves func(move moveFunc)
	// events are the control's request and confirmation, with the status
	// each leaves its session in (none for a reload, which keeps it).
	events []eventStatus
	// wait is the control's status that times out, if any.
	wait *timedWait
	// budgetStop raises the control's request when the spent budget
	// stopped the session (the budget's moves say the status).
	budgetStop func(s *AgentSession, now time.Time)
}

// moveFunc adds the transitions of op from each status of from to to.
type moveFunc = func(op Operation, from []SessionStatus, to SessionStatus, c Case)

// controls are the two-phase controls, in the order of their tables.
// Pause has a file of its own (session_pause.go).
var controls = []control{interrupt, pause, resume, cancel, reload}

var interrupt = control{
	moves: func(move moveFunc) {
		move(OpRequestInterrupt, one(StatusRunning), StatusInterrupting, CaseNone)
		move(OpConfirmInterrupted, one(StatusInterrupting), StatusInterrupted, CaseNone)
	},
	events: []eventStatus{{SessionInterruptRequestedEvent{}, StatusInterrupting}, {SessionInterruptedEvent{}, StatusInterrupted}},
}

var resume = control{
	moves: func(move moveFunc) {
		move(OpRequestResume, one(StatusPaused), StatusResuming, CaseNone)
		move(OpConfirmResumed, one(StatusResuming), StatusRunning, CaseNone)
		move(OpConfirmResumed, one(StatusResuming), StatusPausing, CaseHardCapSpent)
	},
	events: []eventStatus{{SessionResumeRequestedEvent{}, StatusResuming}, {SessionResumedEvent{}, StatusRunning}},
}

var cancel = control{
	moves: func(move moveFunc) {
		move(OpRequestCancel, cancellableLive, StatusCancelling, CaseNone)
		move(OpRequestCancel, one(StatusQueued), StatusCancelled, CaseNone) // no sidecar to stop
		move(OpConfirmCancelled, one(StatusCancelling, StatusQueued), StatusCancelled, CaseNone)
	},
	events: []eventStatus{{SessionCancelRequestedEvent{}, StatusCancelling}, {SessionCancelledEvent{}, StatusCancelled}},
}

// reload's moves, which only a skill change asks for, stand with the
// skills' (waitTransitions).
var reload = control{
	events: []eventStatus{{SessionReloadRequestedEvent{}, ""}, {SessionReloadedEvent{}, ""}},
}

// controlTransitions adds the moves of the two-phase controls to the
// transition table.
func controlTransitions(move moveFunc) {
	for _, c := range controls {
		if c.moves != nil {
			c.moves(move)
		}
	}
}

// controlEventStatuses are the events of the two-phase controls, with
// the status each leaves its session in.
var controlEventStatuses = func() []eventStatus {
	var events []eventStatus
	for _, c := range controls {
		events = append(events, c.events...)
	}
	return events
}()

// controlEvents are the events of the two-phase controls.
var controlEvents = func() []Event {
	events := make([]Event, len(controlEventStatuses))
	for i, e := range controlEventStatuses {
		events[i] = e.event
	}
	return events
}()

// RequestInterrupt asks the sidecar to stop the current turn: Running -> Interrupting.
func (s *AgentSession) RequestInterrupt(now time.Time) error {
	to, err := s.target(OpRequestInterrupt, CaseNone)
	if err != nil {
		return err
	}
	s.moveTo(to, now)
	s.raise(SessionInterruptRequestedEvent{SessionMeta: s.meta(now), CommandID: s.awaitAck(SidecarInterrupt)})
	return nil
}

// ConfirmInterrupted records the interrupt_ack of the awaited interrupt
// (commandID): Interrupting -> Interrupted.
func (s *AgentSession) ConfirmInterrupted(commandID uuid.UUID, now time.Time) error {
	if err := s.checkAck(OpConfirmInterrupted, SidecarInterrupt, commandID); err != nil {
		return err
	}
	to, err := s.target(OpConfirmInterrupted, CaseNone)
	if err != nil {
		return err
	}
	s.acked(SidecarInterrupt)
	s.moveTo(to, now)
	s.raise(SessionInterruptedEvent{SessionMeta: s.meta(now)})
	return nil
}

// RequestResume asks the sidecar to continue: Paused -> Resuming. A
// session whose cap is spent cannot resume until the cap is raised.
func (s *AgentSession) RequestResume(now time.Time) error {
	to, err := s.target(OpRequestResume, CaseNone)
	if err != nil {
		return err
	}
	if s.budget.IsSpent() {
		return s.refuse(OpRequestResume, ErrBudgetExhausted)
	}
	s.moveTo(to, now)
	s.raise(SessionResumeRequestedEvent{SessionMeta: s.meta(now), CommandID: s.awaitAck(SidecarResume)})
	return nil
}

// ConfirmResumed records the resume_ack of the awaited resume (commandID):
// Resuming -> Running. The ack is a fact and is never refused for the
// budget; if late usage spent the cap meanwhile, the session is stopped
// again at once for its budget (Resuming -> Pausing).
func (s *AgentSession) ConfirmResumed(commandID uuid.UUID, now time.Time) error {
	if err := s.checkAck(OpConfirmResumed, SidecarResume, commandID); err != nil {
		return err
	}
	c := CaseNone
	if s.budget.IsSpent() {
		c = CaseHardCapSpent
	}
	to, err := s.target(OpConfirmResumed, c)
	if err != nil {
		return err
	}
	s.acked(SidecarResume)
	s.moveTo(to, now)
	s.raise(SessionResumedEvent{SessionMeta: s.meta(now)})
	if c == CaseHardCapSpent {
		s.stopForBudget(now)
	}
	return nil
}

// RequestCancel stops the session. A session with a sidecar goes to
// Cancelling until the stop_ack; a Queued session has none and is
// Cancelled at once. Intermediate and terminal statuses refuse.
func (s *AgentSession) RequestCancel(now time.Time) error {
	return s.requestCancel(false, now)
}

// RequestForceCancel stops the session as RequestCancel does, but its
// agent is abandoned at once instead of being let finish its running tool.
func (s *AgentSession) RequestForceCancel(now time.Time) error {
	return s.requestCancel(true, now)
}

func (s *AgentSession) requestCancel(force bool, now time.Time) error {
	to, err := s.target(OpRequestCancel, CaseNone)
	if err != nil {
		return err
	}
	s.moveTo(to, now)
	if to == StatusCancelled {
		s.raise(SessionCancelledEvent{SessionMeta: s.meta(now), Direct: true})
		return nil
	}
	s.raise(SessionCancelRequestedEvent{SessionMeta: s.meta(now), CommandID: s.awaitAck(SidecarStop), Force: force})
	return nil
}

// ConfirmCancelled records the stop_ack of the awaited stop (commandID):
// Cancelling -> Cancelled.
func (s *AgentSession) ConfirmCancelled(commandID uuid.UUID, now time.Time) error {
	if err := s.checkAck(OpConfirmCancelled, SidecarStop, commandID); err != nil {
		return err
	}
	from := s.status
	to, err := s.target(OpConfirmCancelled, CaseNone)
	if err != nil {
		return err
	}
	s.acked(SidecarStop)
	s.moveTo(to, now)
	s.raise(SessionCancelledEvent{SessionMeta: s.meta(now), Direct: from == StatusQueued})
	return nil
}

// RecordContextExhausted records that the context window is full:
// Running -> ContextExhausted. The work continues in a new session of the
// session's chain.
func (s *AgentSession) RecordContextExhausted(now time.Time) error {
	to, err := s.target(OpRecordContextExhausted, CaseNone)
	if err != nil {
		return err
	}
	s.moveTo(to, now)
	s.raise(ContextExhaustedEvent{SessionMeta: s.meta(now), ChainID: clonePtr(s.chainID)})
	return nil
}

// RecordVoluntaryHandoff records that the agent chose to hand off although
// capacity remains: Running -> ContextExhausted, same workflow as a forced
// exhaustion, with the handoff content carried by the event.
func (s *AgentSession) RecordVoluntaryHandoff(reason, summary, remainingWork string, now time.Time) error {
	to, err := s.target(OpRecordVoluntaryHandoff, CaseNone)
	if err != nil {
		return err
	}
	if reason, err = requireText("reason", reason, 1, MaxFeedbackChars); err != nil {
		return err
	}
	if summary, err = requireText("summary", summary, 1, MaxHandoffChars); err != nil {
		return err
	}
	if remainingWork, err = requireText("remainingWork", remainingWork, 1, MaxHandoffChars); err != nil {
		return err
	}
	s.moveTo(to, now)
	s.raise(SessionVoluntaryHandoffEvent{
		SessionMeta: s.meta(now), Reason: reason, Summary: summary, RemainingWork: remainingWork,
		ChainID: clonePtr(s.chainID),
	})
	return nil
}

// RecordContextNearingLimit raises the warning that the context window is
// nearly full, so the owner can expect a handoff. Status is unchanged.
func (s *AgentSession) RecordContextNearingLimit(usagePercent float64, now time.Time) error {
	if err := s.allow(OpRecordContextNearingLimit); err != nil {
		return err
	}
	if !(usagePercent > 0 && usagePercent <= 100) {
		return invalid("usagePercent", "must be within (0, 100]")
	}
	var limit int64
	if s.metrics.ContextWindow != nil {
		limit = s.metrics.ContextWindow.ModelContextLimit
	}
	s.updatedAt = now.UTC()
	s.raise(ContextNearingLimitEvent{SessionMeta: s.meta(now), UsagePercent: usagePercent, ModelContextLimit: limit})
	return nil
}

// AssignToChain links the session to the chain continuing its work. It
// is set once (chains are created lazily, after the first exhaustion);
// assigning the same chain again is a no-op.
func (s *AgentSession) AssignToChain(chainID uuid.UUID, now time.Time) error {
	if err := s.allow(OpAssignToChain); err != nil {
		return err
	}
	if err := requireID("chainId", chainID); err != nil {
		return err
	}
	if s.chainID != nil {
		if *s.chainID == chainID {
			return nil
		}
		return s.refuse(OpAssignToChain, ErrAlreadyInChain)
	}
	s.chainID = &chainID
	s.updatedAt = now.UTC()
	s.raise(SessionChainAssignedEvent{SessionMeta: s.meta(now), ChainID: chainID})
	return nil
}
