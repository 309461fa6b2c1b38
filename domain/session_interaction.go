package domain

import (
	"slices"
	"time"
)

// RecordUserQuestionAsked records the agent's question for the owner:
// Running -> WaitingForInput. The question expires after Timeouts().Input
// (see ExpireQuestion). Queued messages wait while the question is open.
func (s *AgentSession) RecordUserQuestionAsked(content string, options []string, now time.Time) error {
	to, err := s.target(OpRecordUserQuestionAsked, CaseNone)
	if err != nil {
		return err
	}
	if content, err = requireText("questionContent", content, 1, MaxQuestionChars); err != nil {
		return err
	}
	for _, o := range options {
		if _, err := requireText("options", o, 1, MaxAnswerChars); err != nil {
			return err
		}
	}
	s.moveTo(to, now)
	q := UserQuestion{Content: content, Options: slices.Clone(options), AskedAt: now.UTC(), ExpiresAt: now.UTC().Add(s.timeouts.Input)}
	s.question = &q
	s.raise(SessionWaitingForInputEvent{
		SessionMeta: s.meta(now), QuestionContent: content, Options: slices.Clone(options), ExpiresAt: q.ExpiresAt,
	})
	return nil
}

// RecordUserQuestionAnswered records the owner's answer: WaitingForInput
// -> Running. The event carries the answer to the sidecar.
func (s *AgentSession) RecordUserQuestionAnswered(answer string, now time.Time) error {
	to, err := s.target(OpRecordUserQuestionAnswered, CaseNone)
	if err != nil {
		return err
	}
	if answer, err = requireText("answer", answer, 1, MaxAnswerChars); err != nil {
		return err
	}
	if err := s.guardBudget(OpRecordUserQuestionAnswered, to); err != nil {
		return err
	}
	s.moveTo(to, now)
	s.raise(SessionInputReceivedEvent{SessionMeta: s.meta(now), Answer: answer})
	return nil
}

// RecordPlanCreated records that the agent entered plan mode: the plan is
// (re)started as a Draft. The content may still be empty; the agent
// writes it before submitting. Status is unchanged.
func (s *AgentSession) RecordPlanCreated(content string, now time.Time) error {
	if err := s.allow(OpRecordPlanCreated); err != nil {
		return err
	}
	content, err := optionalText("planContent", content, MaxPlanChars)
	if err != nil {
		return err
	}
	version := 1
	if s.plan != nil {
		version = s.plan.Version
	}
	s.plan = &SessionPlan{Content: content, Status: PlanDraft, CreatedAt: now.UTC(), Version: version,
		Submitted: s.plan != nil && s.plan.Submitted}
	s.updatedAt = now.UTC()
	s.raise(SessionPlanCreatedEvent{SessionMeta: s.meta(now)})
	return nil
}

// RecordPlanPendingApproval records the plan the agent submitted (its
// content replaces the previous one; every submission after the first
// increments Version). With requiresApproval the session waits:
// Running -> WaitingForApproval. Without, the plan is approved at once
// and the session keeps running; SessionPlanApprovedEvent is raised in
// both cases so one reaction answers the sidecar.
func (s *AgentSession) RecordPlanPendingApproval(content string, requiresApproval bool, now time.Time) error {
	if err := s.allow(OpRecordPlanPendingApproval); err != nil {
		return err
	}
	c := CaseApprovalNotRequired
	if requiresApproval {
		c = CaseApprovalRequired
	}
	to, err := s.target(OpRecordPlanPendingApproval, c)
	if err != nil {
		return err
	}
	if content, err = requireText("planContent", content, 1, MaxPlanChars); err != nil {
		return err
	}
	at := now.UTC()
	plan := SessionPlan{Content: content, CreatedAt: at, Version: 1}
	if s.plan != nil {
		plan.CreatedAt, plan.Version = s.plan.CreatedAt, s.plan.Version
		if s.plan.Submitted {
			plan.Version++
		}
	}
	plan.Submitted = true
	plan.RequiresApproval = requiresApproval
	plan.Status = PlanPendingApproval
	s.moveTo(to, now)
	s.raise(SessionPlanPendingApprovalEvent{SessionMeta: s.meta(now), RequiresApproval: requiresApproval, PlanVersion: plan.Version})
	if !requiresApproval {
		plan.Status = PlanApproved
		plan.ApprovedAt = &at
		s.raise(SessionPlanApprovedEvent{SessionMeta: s.meta(now), Automatic: true})
	}
	s.plan = &plan
	return nil
}

// RecordPlanApproved records the owner's approval: WaitingForApproval ->
// Running.
func (s *AgentSession) RecordPlanApproved(now time.Time) error {
	to, err := s.planDecision(OpRecordPlanApproved)
	if err != nil {
		return err
	}
	s.moveTo(to, now)
	at := now.UTC()
	s.plan.Status = PlanApproved
	s.plan.ApprovedAt = &at
	s.raise(SessionPlanApprovedEvent{SessionMeta: s.meta(now)})
	return nil
}

// RecordPlanRejected records the owner's rejection: WaitingForApproval ->
// Running, with the feedback going to the agent so it revises the plan.
func (s *AgentSession) RecordPlanRejected(feedback string, now time.Time) error {
	to, err := s.planDecision(OpRecordPlanRejected)
	if err != nil {
		return err
	}
	if feedback, err = requireText("feedback", feedback, 1, MaxFeedbackChars); err != nil {
		return err
	}
	s.moveTo(to, now)
	s.plan.Status = PlanRejected
	s.plan.Feedback = feedback
	s.raise(SessionPlanRejectedEvent{SessionMeta: s.meta(now), Feedback: feedback})
	return nil
}

// planDecision checks a plan decision: the status allows it, a plan (not
// a tool use) is what the session waits on, and the budget allows running.
func (s *AgentSession) planDecision(op Operation) (SessionStatus, error) {
	to, err := s.target(op, CaseNone)
	if err != nil {
		return "", err
	}
	if s.plan == nil || s.plan.Status != PlanPendingApproval {
		return "", s.refuse(op, ErrNoPlanPendingApproval)
	}
	return to, s.guardBudget(op, to)
}

// UpdateSessionTaskList replaces the agent's task list with tasks: the
// list is a snapshot, never merged with the previous one.
func (s *AgentSession) UpdateSessionTaskList(tasks []SessionTask, now time.Time) error {
	if err := s.allow(OpUpdateSessionTaskList); err != nil {
		return err
	}
	if err := validateTasks(tasks); err != nil {
		return err
	}
	l := SessionTaskList{Tasks: slices.Clone(tasks), LastUpdatedAt: now.UTC()}
	s.taskList = &l
	s.updatedAt = now.UTC()
	s.raise(SessionTaskListUpdatedEvent{SessionMeta: s.meta(now), TaskCount: len(tasks), CompletedCount: l.CompletedCount()})
	return nil
}
