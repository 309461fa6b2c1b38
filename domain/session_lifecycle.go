package domain

import (
	"time"
)

// Start moves a Queued session to Running. It needs an API key
// (GenerateAPIKey) and an unspent budget. Call it through
// SessionPool.Allocate, which checks the owner's concurrency cap first.
func (s *AgentSession) Start(now time.Time) error {
	to, err := s.target(OpStart, CaseNone)
	if err != nil {
		return err
	}
	if s.apiKeyHash == "" {
		return s.refuse(OpStart, ErrNoAPIKey)
	}
	if err := s.guardBudget(OpStart, to); err != nil {
		return err
	}
	s.moveTo(to, now)
	started := now.UTC()
	s.startedAt = &started
	s.raise(AgentSessionStartedEvent{
		SessionMeta: s.meta(now), WorkingDirectory: s.workingDirectory, Objective: s.objective,
		ModelID: s.modelID, EnabledSkillIDs: cloneIDs(s.enabledSkillIDs), ExecutionMode: s.executionMode,
		RetryCount: s.retryCount,
	})
	return nil
}

// BeginTurn moves an Idle or Interrupted session back to Running when a
// follow-up message starts its next turn. A session whose cap is spent
// stays where it is.
func (s *AgentSession) BeginTurn(now time.Time) error {
	to, err := s.target(OpBeginTurn, CaseNone)
	if err != nil {
		return err
	}
	if err := s.guardBudget(OpBeginTurn, to); err != nil {
		return err
	}
	from := s.status
	s.moveTo(to, now)
	s.raise(AgentSessionTurnBegunEvent{SessionMeta: s.meta(now), From: from})
	return nil
}

// RecordOutput ends a turn that delivered work: Running -> Idle with the
// output kept and HasPendingReview set until the owner approves or rejects.
func (s *AgentSession) RecordOutput(out SessionOutput, now time.Time) error {
	to, err := s.target(OpRecordOutput, CaseNone)
	if err != nil {
		return err
	}
	if err := out.Validate(); err != nil {
		return err
	}
	s.moveTo(to, now)
	s.output = &out
	s.hasPendingReview = true
	s.countTurn(now)
	s.raise(AgentSessionOutputReadyEvent{
		SessionMeta: s.meta(now), FilesChanged: out.FilesChanged, TestsAdded: out.TestsAdded,
		AllTestsPassing: out.AllTestsPassing, CommitSha: out.CommitSha, TurnCount: s.metrics.TurnCount,
	})
	return nil
}

// RecordTurnCompleted ends a turn without final output: Running -> Idle,
// ready for a follow-up.
func (s *AgentSession) RecordTurnCompleted(now time.Time) error {
	to, err := s.target(OpRecordTurnCompleted, CaseNone)
	if err != nil {
		return err
	}
	s.moveTo(to, now)
	s.countTurn(now)
	s.raise(AgentSessionTurnCompletedEvent{SessionMeta: s.meta(now), TurnCount: s.metrics.TurnCount, LastTurnAt: now.UTC()})
	return nil
}

// countTurn advances TurnCount and LastTurnAt on every Running -> Idle.
func (s *AgentSession) countTurn(now time.Time) {
	t := now.UTC()
	s.metrics.TurnCount++
	s.metrics.LastTurnAt = &t
}

// RecordLogChunk validates a chunk the agent logs (a decision) for the log
// buffer. It changes nothing and raises nothing: chunks are appended by the
// repository and streamed to the UI directly. Chunks are accepted while the
// session has a sidecar: once it ended (Cancelled, Completed, Failed,
// ContextExhausted) no agent runs for it, and its key logs nothing more.
func (s *AgentSession) RecordLogChunk(chunk SessionLogChunk) error {
	if err := s.allow(OpRecordLogChunk); err != nil {
		return err
	}
	return chunk.Validate()
}

// ApproveOutput accepts the output awaiting review: Idle -> Completed.
func (s *AgentSession) ApproveOutput(now time.Time) error {
	to, err := s.target(OpApproveOutput, CaseNone)
	if err != nil {
		return err
	}
	if !s.hasPendingReview {
		return s.refuse(OpApproveOutput, ErrNoPendingReview)
	}
	s.moveTo(to, now)
	s.hasPendingReview = false
	sha := ""
	if s.output != nil {
		sha = s.output.CommitSha
	}
	s.raise(AgentSessionApprovedEvent{SessionMeta: s.meta(now), CommitSha: sha})
	return nil
}

// RejectOutput refuses the output awaiting review: Idle -> Failed with
// reason VerificationFailed. A rejected session may be retried.
func (s *AgentSession) RejectOutput(reason string, now time.Time) error {
	to, err := s.target(OpRejectOutput, CaseNone)
	if err != nil {
		return err
	}
	if !s.hasPendingReview {
		return s.refuse(OpRejectOutput, ErrNoPendingReview)
	}
	reason, err = optionalText("reason", reason, MaxFeedbackChars)
	if err != nil {
		return err
	}
	s.moveTo(to, now)
	s.hasPendingReview = false
	s.failure = &Failure{Reason: FailureVerificationFailed, Message: reason}
	s.raise(AgentSessionRejectedEvent{SessionMeta: s.meta(now), Reason: reason})
	return nil
}

// Close ends an Idle session that has no output to review: -> Completed.
func (s *AgentSession) Close(now time.Time) error {
	to, err := s.target(OpClose, CaseNone)
	if err != nil {
		return err
	}
	if s.hasPendingReview {
		return s.refuse(OpClose, ErrPendingReview)
	}
	s.moveTo(to, now)
	s.raise(AgentSessionClosedEvent{SessionMeta: s.meta(now)})
	return nil
}

// RecordFailure fails a session whose sidecar is (or was) live. Beyond the
// statuses the model first listed, a session waiting for a person or Idle
// can fail too: its sidecar can still crash, and timeouts fail it.
func (s *AgentSession) RecordFailure(reason FailureReason, message string, now time.Time) error {
	to, err := s.target(OpRecordFailure, CaseNone)
	if err != nil {
		return err
	}
	if !reason.IsValid() {
		return invalid("failureReason", "unknown failure reason %q", reason)
	}
	s.fail(to, reason, message, now)
	return nil
}

// FailHandoff fails a session whose handoff cannot be continued (its
// chain is full): ContextExhausted -> Failed, with the reason a person
// reads. The chain's limit is a bound on what the work may consume, so the
// failure is BudgetExhausted.
func (s *AgentSession) FailHandoff(message string, now time.Time) error {
	to, err := s.target(OpFailHandoff, CaseNone)
	if err != nil {
		return err
	}
	s.fail(to, FailureBudgetExhausted, message, now)
	return nil
}

// fail applies a looked-up move to Failed.
func (s *AgentSession) fail(to SessionStatus, reason FailureReason, message string, now time.Time) {
	s.moveTo(to, now)
	s.failure = &Failure{Reason: reason, Message: message}
	s.raise(AgentSessionFailedEvent{SessionMeta: s.meta(now), FailureReason: reason, Message: message})
}

// Retry queues a failed session again (Failed -> Queued), at most
// MaxRetries times. Output, review flag, failure and the auto-continue
// count are reset; spend and metrics are kept, because the money was
// spent. Generate a new API key before starting it again.
func (s *AgentSession) Retry(instruction string, now time.Time) error {
	to, err := s.target(OpRetry, CaseNone)
	if err != nil {
		return err
	}
	if s.retryCount >= MaxRetries {
		return s.refuse(OpRetry, ErrMaxRetriesReached)
	}
	instruction, err = optionalText("additionalInstruction", instruction, MaxObjectiveChars)
	if err != nil {
		return err
	}
	s.moveTo(to, now)
	s.retryCount++
	s.retryInstruction = instruction
	s.output = nil
	s.hasPendingReview = false
	s.failure = nil
	s.completedAt = nil
	s.startedAt = nil
	s.reloadPending = false
	s.awaited = nil
	if s.autoContinue != nil {
		s.autoContinue.CurrentContinuationCount = 0
	}
	s.raise(AgentSessionRetriedEvent{SessionMeta: s.meta(now), RetryCount: s.retryCount, AdditionalInstruction: instruction})
	return nil
}
