package domain_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
)

func TestNewAgentSession(t *testing.T) {
	t.Parallel()
	tmpl := uuid.New()
	tests := []struct {
		name    string
		mutate  func(*domain.NewSessionParams)
		wantErr string // the failing field, "" for success
	}{
		{"valid", func(p *domain.NewSessionParams) {}, ""},
		{"with template and skills", func(p *domain.NewSessionParams) {
			p.TemplateID, p.EnabledSkillIDs = &tmpl, []uuid.UUID{uuid.New(), uuid.New()}
		}, ""},
		{"objective 2000 chars", func(p *domain.NewSessionParams) { p.Objective = strings.Repeat("o", 2000) }, ""},
		{"objective too long", func(p *domain.NewSessionParams) { p.Objective = strings.Repeat("o", 2001) }, "objective"},
		{"objective empty", func(p *domain.NewSessionParams) { p.Objective = " " }, "objective"},
		{"name too long", func(p *domain.NewSessionParams) { p.Name = strings.Repeat("n", 201) }, "name"},
		{"relative directory", func(p *domain.NewSessionParams) { p.WorkingDirectory = "repo" }, "workingDirectory"},
		{"no model", func(p *domain.NewSessionParams) { p.ModelID = "" }, "modelId"},
		{"no owner", func(p *domain.NewSessionParams) { p.OwnerID = uuid.Nil }, "ownerId"},
		{"zero cap", func(p *domain.NewSessionParams) { p.Budget.HardCapUsd = 0 }, "budget.hardCapUsd"},
		{"warn at 100", func(p *domain.NewSessionParams) { p.Budget.WarnAtPercent = 100 }, "budget.warnAtPercent"},
		{"duplicate skill", func(p *domain.NewSessionParams) { id := uuid.New(); p.EnabledSkillIDs = []uuid.UUID{id, id} }, "enabledSkillIds"},
		{"unknown mode", func(p *domain.NewSessionParams) { p.ExecutionMode = "Batch" }, "executionMode"},
		{"bad auto-continue", func(p *domain.NewSessionParams) { p.AutoContinue = &domain.AutoContinueConfig{} }, "autoContinue.maxContinuations"},
		{"with a trace", func(p *domain.NewSessionParams) { p.TraceID = "4bf92f3577b34da6a3ce929d0e0e4736" }, ""},
		{"trace id too short", func(p *domain.NewSessionParams) { p.TraceID = "4bf92f35" }, "traceId"},
		{"trace id in capitals", func(p *domain.NewSessionParams) { p.TraceID = "4BF92F3577B34DA6A3CE929D0E0E4736" }, "traceId"},
		{"trace id all zero", func(p *domain.NewSessionParams) { p.TraceID = strings.Repeat("0", 32) }, "traceId"},
		{"bad policy", func(p *domain.NewSessionParams) {
			p.ToolApproval = &domain.ToolApprovalPolicy{Mode: domain.ApprovalList, Timeout: 1, OnTimeout: domain.TimeoutDeny}
		}, "toolApproval.tools"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newSessionParams()
			tt.mutate(&p)
			s, err := domain.NewAgentSession(p)
			if tt.wantErr != "" {
				var ve *domain.ValidationError
				require.ErrorAs(t, err, &ve)
				assert.Equal(t, tt.wantErr, ve.Field())
				assert.Equal(t, domain.KindValidation, ve.Kind())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, domain.StatusQueued, s.Status())
			assert.True(t, strings.HasPrefix(p.Objective, strings.TrimSuffix(s.Name(), "…")), "the name defaults to the objective's first line")
			assert.LessOrEqual(t, len([]rune(s.Name())), domain.MaxSessionNameChars)
			assert.Equal(t, domain.ModeStandalone, s.ExecutionMode())
			assert.Equal(t, p.TraceID, s.TraceID())
			restored, err := domain.UnmarshalAgentSessionFromDatabase(s.Snapshot())
			require.NoError(t, err)
			assert.Equal(t, p.TraceID, restored.TraceID(), "the trace id is kept")
			assert.Equal(t, domain.DefaultWarnAtPercent, s.Budget().WarnAtPercent)
			assert.Equal(t, domain.DefaultToolApprovalPolicy(), s.ToolApproval())
			assert.Equal(t, domain.DefaultSessionTimeouts(), s.Timeouts())
			assert.Equal(t, int64(0), s.Version())
			assert.Equal(t, []string{"agent_session_created"}, eventTypes(s.PopEvents()))
		})
	}
}

func TestSessionHappyPath(t *testing.T) {
	t.Parallel()
	s, err := domain.NewAgentSession(newSessionParams())
	require.NoError(t, err)
	require.ErrorIs(t, s.Start(t0), domain.ErrNoAPIKey, "a session starts with its API key")
	key, err := s.GenerateAPIKey(entropy())
	require.NoError(t, err)
	require.NoError(t, s.Start(t0.Add(1)))
	require.NotNil(t, s.StartedAt())
	assert.Equal(t, "Add retries to the HTTP client", s.Name())

	require.NoError(t, s.RecordOutput(domain.SessionOutput{OutputLineCount: 120, FilesChanged: 3, TestsAdded: 2,
		AllTestsPassing: true, CommitSha: strings.Repeat("ab", 20)}, t0.Add(2)))
	assert.Equal(t, domain.StatusIdle, s.Status())
	assert.True(t, s.HasPendingReview())

	require.ErrorIs(t, s.Close(t0.Add(3)), domain.ErrPendingReview)
	require.NoError(t, s.ApproveOutput(t0.Add(3)))
	assert.Equal(t, domain.StatusCompleted, s.Status())
	assert.False(t, s.HasPendingReview())
	require.NotNil(t, s.CompletedAt())
	assert.Equal(t, t0.Add(3), *s.CompletedAt())

	events := s.PopEvents()
	assert.Equal(t, []string{"agent_session_created", "agent_session_started", "agent_session_output_ready", "agent_session_approved"}, eventTypes(events))
	approved := events[3].(domain.AgentSessionApprovedEvent)
	assert.Equal(t, strings.Repeat("ab", 20), approved.CommitSha)
	assert.Equal(t, ownerID, approved.AggregateOwnerID())
	assert.True(t, s.VerifyAPIKey(key))
}

func TestSessionReviewGuards(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		review  bool
		call    func(*domain.AgentSession) error
		wantErr error
		want    domain.SessionStatus
	}{
		{"approve without review", false, func(s *domain.AgentSession) error { return s.ApproveOutput(t0) }, domain.ErrNoPendingReview, domain.StatusIdle},
		{"reject without review", false, func(s *domain.AgentSession) error { return s.RejectOutput("", t0) }, domain.ErrNoPendingReview, domain.StatusIdle},
		{"close with review", true, func(s *domain.AgentSession) error { return s.Close(t0) }, domain.ErrPendingReview, domain.StatusIdle},
		{"close without review", false, func(s *domain.AgentSession) error { return s.Close(t0) }, nil, domain.StatusCompleted},
		{"reject with review", true, func(s *domain.AgentSession) error { return s.RejectOutput("no tests", t0) }, nil, domain.StatusFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			snap := snapshotIn(t, domain.StatusIdle)
			snap.HasPendingReview = tt.review
			s := load(t, snap)
			err := tt.call(s)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				require.ErrorIs(t, err, domain.ErrConflict)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.want, s.Status())
		})
	}
	t.Run("rejection records the reason", func(t *testing.T) {
		snap := snapshotIn(t, domain.StatusIdle)
		snap.HasPendingReview = true
		s := load(t, snap)
		require.NoError(t, s.RejectOutput("no tests", t0))
		require.NotNil(t, s.Failure())
		assert.Equal(t, domain.Failure{Reason: domain.FailureVerificationFailed, Message: "no tests"}, *s.Failure())
		assert.False(t, s.HasPendingReview())
	})
}

func TestSessionTwoPhaseLifecycle(t *testing.T) {
	t.Parallel()
	s := runningSession(t)
	var stop uuid.UUID
	steps := []struct {
		call  func() error
		want  domain.SessionStatus
		event string
	}{
		{func() error { return s.RequestPause(t0) }, domain.StatusPausing, "session_pause_requested"},
		{func() error { return s.ConfirmPaused(awaited(t, s, domain.SidecarPause), t0) }, domain.StatusPaused, "session_paused"},
		{func() error { return s.RequestResume(t0) }, domain.StatusResuming, "session_resume_requested"},
		{func() error { return s.ConfirmResumed(awaited(t, s, domain.SidecarResume), t0) }, domain.StatusRunning, "session_resumed"},
		{func() error { return s.RequestInterrupt(t0) }, domain.StatusInterrupting, "session_interrupt_requested"},
		{func() error { return s.ConfirmInterrupted(awaited(t, s, domain.SidecarInterrupt), t0) }, domain.StatusInterrupted, "session_interrupted"},
		{func() error { return s.BeginTurn(t0) }, domain.StatusRunning, "agent_session_turn_begun"},
		{func() error { return s.RequestCancel(t0) }, domain.StatusCancelling, "session_cancel_requested"},
		{func() error { stop = awaited(t, s, domain.SidecarStop); return s.ConfirmCancelled(stop, t0) }, domain.StatusCancelled, "session_cancelled"},
	}
	for _, step := range steps {
		require.NoError(t, step.call())
		assert.Equal(t, step.want, s.Status())
		assert.Equal(t, []string{step.event}, eventTypes(s.PopEvents()))
	}
	require.ErrorIs(t, s.ConfirmCancelled(stop, t0), domain.ErrUnexpectedAck, "a duplicate ack is refused")
}

// TestCancellingSessionWhoseSidecarDiesFails: the sidecar that was to
// acknowledge the stop died (it crashed too often and its runtime ended
// the session for it): its failure ends the session, which must not wait
// in Cancelling for an ack that cannot come.
func TestCancellingSessionWhoseSidecarDiesFails(t *testing.T) {
	t.Parallel()
	s := runningSession(t)
	require.NoError(t, s.RequestCancel(t0))
	s.PopEvents()
	require.NoError(t, s.RecordFailure(domain.FailureInfrastructureError, "the sidecar kept exiting without session_end", t0))
	assert.Equal(t, domain.StatusFailed, s.Status())
	assert.True(t, s.Status().IsTerminal())
	assert.Equal(t, []string{"agent_session_failed"}, eventTypes(s.PopEvents()))
}

func TestSessionDuplicateRequestsAreRefused(t *testing.T) {
	t.Parallel()
	s := runningSession(t)
	require.NoError(t, s.RequestPause(t0))
	err := s.RequestPause(t0)
	var te *domain.TransitionError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, "Pausing", te.CurrentStatus())
	assert.Equal(t, "cannot RequestPause: AgentSession is Pausing: operation not allowed in the current status", err.Error())
	require.ErrorIs(t, s.RequestCancel(t0), domain.ErrInvalidTransition, "no cancel while a pause is pending")
}

func TestCancelQueuedSessionDirectly(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	require.NoError(t, s.RequestCancel(t0))
	assert.Equal(t, domain.StatusCancelled, s.Status())
	events := s.PopEvents()
	require.Len(t, events, 1, "no stop command for a session that has no sidecar")
	assert.True(t, events[0].(domain.SessionCancelledEvent).Direct)
	require.NotNil(t, s.CompletedAt())
	assert.Empty(t, s.AwaitedAcks())
}

func TestRetry(t *testing.T) {
	t.Parallel()
	snap := snapshotIn(t, domain.StatusIdle)
	snap.HasPendingReview = true
	snap.Output = &domain.SessionOutput{FilesChanged: 1}
	snap.AutoContinue = &domain.AutoContinueConfig{MaxContinuations: 2, CurrentContinuationCount: 2, IsEnabled: true}
	s := load(t, snap)
	require.NoError(t, s.RejectOutput("wrong approach", t0))

	for i := 1; i <= domain.MaxRetries; i++ {
		require.NoError(t, s.Retry("smaller steps", t0))
		assert.Equal(t, domain.StatusQueued, s.Status())
		assert.Equal(t, i, s.RetryCount())
		assert.Nil(t, s.Output())
		assert.Nil(t, s.Failure())
		assert.Nil(t, s.CompletedAt())
		assert.False(t, s.HasPendingReview())
		assert.Equal(t, 0, s.AutoContinue().CurrentContinuationCount, "retry resets the auto-continue count")
		_, err := s.GenerateAPIKey(entropy())
		require.NoError(t, err, "a retried session gets a fresh key for its new sidecar")
		require.NoError(t, s.Start(t0))
		require.NoError(t, s.RecordFailure(domain.FailureAgentError, "exit 1", t0))
	}
	err := s.Retry("", t0)
	require.ErrorIs(t, err, domain.ErrMaxRetriesReached)
	assert.Equal(t, domain.StatusFailed, s.Status())
}

func TestAutoContinuationLimit(t *testing.T) {
	t.Parallel()
	snap := snapshotIn(t, domain.StatusIdle)
	snap.AutoContinue = &domain.AutoContinueConfig{MaxContinuations: 2, IsEnabled: true}
	s := load(t, snap)
	require.NoError(t, s.RecordAutoContinuation(t0))
	require.NoError(t, s.RecordAutoContinuation(t0))
	require.ErrorIs(t, s.RecordAutoContinuation(t0), domain.ErrAutoContinueLimit)
	assert.Equal(t, 2, s.AutoContinue().CurrentContinuationCount)
}

func TestSpentAutoContinuationLeavesTheSessionIdleWithoutPendingReview(t *testing.T) {
	t.Parallel()
	snap := snapshotIn(t, domain.StatusIdle)
	snap.HasPendingReview = true
	snap.Output = &domain.SessionOutput{FilesChanged: 1}
	snap.AutoContinue = &domain.AutoContinueConfig{MaxContinuations: 1, IsEnabled: true}
	s := load(t, snap)
	require.ErrorIs(t, s.StopAutoContinuation(t0), domain.ErrAutoContinueNotSpent, "a continuation is left")
	require.NoError(t, s.RecordAutoContinuation(t0))
	s.PopEvents()

	require.NoError(t, s.StopAutoContinuation(t0))
	assert.Equal(t, domain.StatusIdle, s.Status())
	assert.False(t, s.HasPendingReview(), "the owner reviews by hand (seed 001 §8.10)")
	events := s.PopEvents()
	require.Len(t, events, 1)
	assert.Equal(t, domain.SessionAutoContinueExhaustedEvent{SessionMeta: events[0].(domain.SessionAutoContinueExhaustedEvent).SessionMeta,
		MaxContinuations: 1}, events[0])

	off := load(t, snapshotIn(t, domain.StatusIdle))
	require.ErrorIs(t, off.StopAutoContinuation(t0), domain.ErrAutoContinueNotSpent, "no loop to stop")
}

func TestContextExhaustionAndHandoff(t *testing.T) {
	t.Parallel()
	chain := uuid.New()
	s := runningSession(t)
	require.NoError(t, s.AssignToChain(chain, t0))
	require.NoError(t, s.AssignToChain(chain, t0), "assigning the same chain again is a no-op")
	require.ErrorIs(t, s.AssignToChain(uuid.New(), t0), domain.ErrAlreadyInChain)
	require.NoError(t, s.RecordContextNearingLimit(87.5, t0))
	require.ErrorIs(t, s.RecordVoluntaryHandoff("polluted", "", "rest", t0), domain.ErrValidation)
	require.NoError(t, s.RecordVoluntaryHandoff("polluted", "did the parser", "write the printer", t0))
	assert.Equal(t, domain.StatusContextExhausted, s.Status())
	events := s.PopEvents()
	assert.Equal(t, []string{"session_chain_assigned", "context_nearing_limit", "session_voluntary_handoff"}, eventTypes(events))
	h := events[2].(domain.SessionVoluntaryHandoffEvent)
	assert.Equal(t, &chain, h.ChainID)
	assert.Equal(t, "write the printer", h.RemainingWork)
	assert.Nil(t, s.CompletedAt(), "ContextExhausted is not a closure of the run")

	q := newQueue(t)
	_, err := q.Enqueue(uuid.New(), "more", domain.PriorityQueued, domain.MessageFromUser, s.Status(), t0)
	require.ErrorIs(t, err, domain.ErrConflict, "an exhausted session takes no messages")
}
