package domain_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
)

// invocation calls one operation of the table in one case: prepare sets
// the state the case needs (whatever the status), call invokes the method.
type invocation struct {
	op      domain.Operation
	c       domain.Case
	prepare func(*domain.AgentSessionSnapshot)
	call    func(*testing.T, *domain.AgentSession, time.Time) error
}

var (
	skillID     = uuid.MustParse("00000000-0000-4000-8000-0000000000a1")
	enabledID   = uuid.MustParse("00000000-0000-4000-8000-0000000000a2")
	requestID   = "perm-1"
	dueSoon     = func(s *domain.AgentSessionSnapshot) {}
	pendingPerm = func(s *domain.AgentSessionSnapshot) {
		s.Plan = nil
		s.PendingPermission = &domain.PermissionRequest{RequestID: requestID, ToolName: "Bash", Input: `{}`, AskedAt: t0, ExpiresAt: t0.Add(time.Minute)}
	}
)

func onTimeout(b domain.PermissionTimeoutBehavior) func(*domain.AgentSessionSnapshot) {
	return func(s *domain.AgentSessionSnapshot) {
		pendingPerm(s)
		s.ToolApproval.Mode, s.ToolApproval.OnTimeout = domain.ApprovalAll, b
	}
}

func metrics(cost domain.USD) domain.MetricsUpdate {
	return domain.MetricsUpdate{ModelID: "claude-sonnet-4-6", Cost: cost, Tokens: domain.TokenUsage{InputTokens: 10},
		ContextWindow: domain.ContextWindowSnapshot{InputTokens: 10, ModelContextLimit: 200000}}
}

func none(s *domain.AgentSessionSnapshot) {}

// invocations has one entry per (operation, case) of the table.
func invocations() []invocation {
	return []invocation{
		{domain.OpGenerateAPIKey, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			_, err := s.GenerateAPIKey(entropy())
			return err
		}},
		{domain.OpIssueSidecarKey, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			_, err := s.IssueSidecarKey(entropy(), "script")
			return err
		}},
		{domain.OpStart, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error { return s.Start(now) }},
		{domain.OpBeginTurn, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error { return s.BeginTurn(now) }},
		{domain.OpRecordOutput, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.RecordOutput(domain.SessionOutput{OutputLineCount: 3, FilesChanged: 1}, now)
		}},
		{domain.OpRecordTurnCompleted, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error { return s.RecordTurnCompleted(now) }},
		{domain.OpRecordLogChunk, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.RecordLogChunk(domain.SessionLogChunk{SequenceNumber: 1, Content: "compiling", RecordedAt: now})
		}},
		{domain.OpRequestInterrupt, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error { return s.RequestInterrupt(now) }},
		{domain.OpConfirmInterrupted, domain.CaseNone, awaiting(domain.SidecarInterrupt), func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.ConfirmInterrupted(ackID, now)
		}},
		{domain.OpRequestPause, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error { return s.RequestPause(now) }},
		{domain.OpConfirmPaused, domain.CaseNone, awaiting(domain.SidecarPause), func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.ConfirmPaused(ackID, now)
		}},
		{domain.OpRequestResume, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error { return s.RequestResume(now) }},
		{domain.OpConfirmResumed, domain.CaseNone, awaiting(domain.SidecarResume), func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.ConfirmResumed(ackID, now)
		}},
		{domain.OpConfirmResumed, domain.CaseHardCapSpent, func(s *domain.AgentSessionSnapshot) {
			awaiting(domain.SidecarResume)(s)
			s.Budget.EstimatedCostUsd, s.Budget.ExhaustionRaised, s.Budget.WarningRaised = s.Budget.HardCapUsd, true, true
		}, func(t *testing.T, s *domain.AgentSession, now time.Time) error { return s.ConfirmResumed(ackID, now) }},
		{domain.OpRequestCancel, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error { return s.RequestCancel(now) }},
		{domain.OpConfirmCancelled, domain.CaseNone, awaiting(domain.SidecarStop), func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.ConfirmCancelled(ackID, now)
		}},
		{domain.OpRecordContextExhausted, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error { return s.RecordContextExhausted(now) }},
		{domain.OpRecordVoluntaryHandoff, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.RecordVoluntaryHandoff("context polluted", "did A", "do B", now)
		}},
		{domain.OpRecordContextNearingLimit, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.RecordContextNearingLimit(86, now)
		}},
		{domain.OpAssignToChain, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.AssignToChain(uuid.MustParse("00000000-0000-4000-8000-0000000000c1"), now)
		}},
		{domain.OpRecordUserQuestionAsked, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.RecordUserQuestionAsked("Postgres or SQLite?", []string{"Postgres", "SQLite"}, now)
		}},
		{domain.OpRecordUserQuestionAnswered, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.RecordUserQuestionAnswered("Postgres", now)
		}},
		{domain.OpRecordPlanCreated, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error { return s.RecordPlanCreated("", now) }},
		{domain.OpRecordPlanPendingApproval, domain.CaseApprovalRequired, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.RecordPlanPendingApproval("the plan", true, now)
		}},
		{domain.OpRecordPlanPendingApproval, domain.CaseApprovalNotRequired, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.RecordPlanPendingApproval("the plan", false, now)
		}},
		{domain.OpRecordPlanApproved, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error { return s.RecordPlanApproved(now) }},
		{domain.OpRecordPlanRejected, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.RecordPlanRejected("split step 2", now)
		}},
		{domain.OpUpdateSessionTaskList, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.UpdateSessionTaskList([]domain.SessionTask{{ID: "1", Subject: "write test", Status: domain.TaskPending}}, now)
		}},
		{domain.OpRequestToolPermission, domain.CaseApprovalRequired, func(s *domain.AgentSessionSnapshot) { s.ToolApproval.Mode = domain.ApprovalAll },
			func(t *testing.T, s *domain.AgentSession, now time.Time) error {
				_, err := s.RequestToolPermission("perm-2", "Bash", `{"command":"ls"}`, now)
				return err
			}},
		{domain.OpRequestToolPermission, domain.CaseApprovalNotRequired, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			_, err := s.RequestToolPermission("perm-2", "Bash", `{"command":"ls"}`, now)
			return err
		}},
		{domain.OpApproveToolPermission, domain.CaseNone, pendingPerm, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.ApproveToolPermission(requestID, "", now)
		}},
		{domain.OpDenyToolPermission, domain.CaseNone, pendingPerm, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.DenyToolPermission(requestID, "not now", now)
		}},
		{domain.OpExpireQuestion, domain.CaseDefaultAnswer, func(s *domain.AgentSessionSnapshot) { s.Timeouts.DefaultAnswer = "use your judgement" },
			func(t *testing.T, s *domain.AgentSession, now time.Time) error { return s.ExpireQuestion(now) }},
		{domain.OpExpireQuestion, domain.CaseNoDefaultAnswer, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error { return s.ExpireQuestion(now) }},
		{domain.OpExpireToolPermission, domain.CaseTimeoutDeny, onTimeout(domain.TimeoutDeny), func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.ExpireToolPermission(now)
		}},
		{domain.OpExpireToolPermission, domain.CaseTimeoutAllow, onTimeout(domain.TimeoutAllow), func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.ExpireToolPermission(now)
		}},
		{domain.OpExpireToolPermission, domain.CaseTimeoutFail, onTimeout(domain.TimeoutFail), func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.ExpireToolPermission(now)
		}},
		{domain.OpExpirePause, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error { return s.ExpirePause(now) }},
		{domain.OpEnableSkill, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.EnableSkill(mustSkill(t, skillID, "go-style", "Use gofmt."), now)
		}},
		{domain.OpDisableSkill, domain.CaseNone, func(s *domain.AgentSessionSnapshot) { s.EnabledSkillIDs = []uuid.UUID{enabledID} },
			func(t *testing.T, s *domain.AgentSession, now time.Time) error { return s.DisableSkill(enabledID, now) }},
		{domain.OpRequestReload, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error { return s.RequestReload(now) }},
		{domain.OpConfirmReloaded, domain.CaseNone, func(s *domain.AgentSessionSnapshot) { s.ReloadPending = true; awaiting(domain.SidecarReload)(s) },
			func(t *testing.T, s *domain.AgentSession, now time.Time) error { return s.ConfirmReloaded(ackID, now) }},
		{domain.OpApproveOutput, domain.CaseNone, func(s *domain.AgentSessionSnapshot) { s.HasPendingReview = true },
			func(t *testing.T, s *domain.AgentSession, now time.Time) error { return s.ApproveOutput(now) }},
		{domain.OpRejectOutput, domain.CaseNone, func(s *domain.AgentSessionSnapshot) { s.HasPendingReview = true },
			func(t *testing.T, s *domain.AgentSession, now time.Time) error {
				return s.RejectOutput("tests are missing", now)
			}},
		{domain.OpClose, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error { return s.Close(now) }},
		{domain.OpRecordFailure, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.RecordFailure(domain.FailureAgentError, "exit 1", now)
		}},
		{domain.OpRetry, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.Retry("try smaller steps", now)
		}},
		{domain.OpFailHandoff, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.FailHandoff("the chain is full", now)
		}},
		{domain.OpStopAutoContinuation, domain.CaseNone, func(s *domain.AgentSessionSnapshot) {
			s.AutoContinue = &domain.AutoContinueConfig{MaxContinuations: 2, CurrentContinuationCount: 2, IsEnabled: true}
		}, func(t *testing.T, s *domain.AgentSession, now time.Time) error { return s.StopAutoContinuation(now) }},
		{domain.OpRecordAutoContinuation, domain.CaseNone, func(s *domain.AgentSessionSnapshot) {
			s.AutoContinue = &domain.AutoContinueConfig{MaxContinuations: 5, IsEnabled: true}
		}, func(t *testing.T, s *domain.AgentSession, now time.Time) error { return s.RecordAutoContinuation(now) }},
		{domain.OpUpdateMetrics, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.UpdateMetrics(metrics(domain.Dollars(1)), now)
		}},
		{domain.OpUpdateMetrics, domain.CaseHardCapReached, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.UpdateMetrics(metrics(domain.Dollars(10)), now)
		}},
		{domain.OpRaiseBudget, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.RaiseBudget(domain.Dollars(20), now)
		}},
		{domain.OpRecordAgentMessage, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			_, err := s.RecordAgentMessage(uuid.New(), domain.SourceAgent, nil, "done", now)
			return err
		}},
		{domain.OpRecordToolCall, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			_, err := s.RecordToolCall(uuid.New(), "Read", `{"path":"a.go"}`, nil, now)
			return err
		}},
		{domain.OpRecordToolCallResult, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			call, err := domain.NewToolCall(uuid.New(), s.ID(), nil, "Read", `{}`, now)
			require.NoError(t, err)
			return s.RecordToolCallResult(call, domain.ToolResult{Content: "package a"}, now)
		}},
		{domain.OpStartSubAgent, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			_, err := s.StartSubAgent(uuid.New(), "claude-haiku-4-5", "run tests", now)
			return err
		}},
		{domain.OpCompleteSubAgent, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			a, err := domain.NewSubAgentSession(uuid.New(), s.ID(), "claude-haiku-4-5", "run tests", now)
			require.NoError(t, err)
			return s.CompleteSubAgent(a, now)
		}},
		{domain.OpFailSubAgent, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			a, err := domain.NewSubAgentSession(uuid.New(), s.ID(), "claude-haiku-4-5", "run tests", now)
			require.NoError(t, err)
			return s.FailSubAgent(a, domain.FailureAgentError, now)
		}},
		{domain.OpRecordAPITaskCreated, domain.CaseNone, none, func(t *testing.T, s *domain.AgentSession, now time.Time) error {
			return s.RecordAPITaskCreated(uuid.New(), domain.APITask{Title: "Follow up", Priority: "Low"}, now)
		}},
	}
}

// TestSessionTransitionTable runs every (status, operation, case) and
// checks the outcome against the table the methods consult: the status the
// table names, or a TransitionError naming the operation and the status,
// with the session left untouched.
func TestSessionTransitionTable(t *testing.T) {
	t.Parallel()
	now := t0.Add(48 * time.Hour) // every wait has expired by then
	for _, inv := range invocations() {
		for _, st := range domain.AllSessionStatuses() {
			name := fmt.Sprintf("%s/%s/%s", inv.op, inv.c, st)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				snap := snapshotIn(t, st)
				inv.prepare(&snap)
				s := load(t, snap)
				err := inv.call(t, s, now)

				want, allowed := domain.NextStatus(inv.op, st, inv.c)
				if allowed {
					require.NoError(t, err)
					assert.Equal(t, want, s.Status())
					return
				}
				require.Error(t, err)
				var te *domain.TransitionError
				require.ErrorAs(t, err, &te)
				assert.Equal(t, string(inv.op), te.Operation)
				assert.Equal(t, string(st), te.CurrentStatus())
				assert.ErrorIs(t, err, domain.ErrInvalidTransition)
				assert.ErrorIs(t, err, domain.ErrConflict)
				assert.Equal(t, domain.KindConflict, te.Kind())
				assert.Contains(t, err.Error(), string(inv.op))
				assert.Contains(t, err.Error(), string(st))
				assert.Equal(t, snap, s.Snapshot(), "a refused operation changes nothing")
				assert.Empty(t, s.PopEvents(), "a refused operation raises nothing")
			})
		}
	}
}

// TestTransitionTableIsCovered checks that the exhaustive test above
// invokes every operation and case of the table, and nothing else.
func TestTransitionTableIsCovered(t *testing.T) {
	t.Parallel()
	type opCase struct {
		op domain.Operation
		c  domain.Case
	}
	inTable, invoked := map[opCase]bool{}, map[opCase]bool{}
	for _, tr := range domain.SessionTransitions() {
		inTable[opCase{tr.Op, tr.Case}] = true
	}
	for _, inv := range invocations() {
		key := opCase{inv.op, inv.c}
		require.False(t, invoked[key], "duplicate invocation %v", key)
		invoked[key] = true
	}
	assert.Equal(t, inTable, invoked)
}

func TestTransitionTableShape(t *testing.T) {
	t.Parallel()
	for _, tr := range domain.SessionTransitions() {
		assert.True(t, tr.From.IsValid() && tr.To.IsValid(), "%+v", tr)
	}
	tests := []struct {
		status domain.SessionStatus
		op     domain.Operation
		want   bool
	}{
		{domain.StatusRunning, domain.OpRequestPause, true},
		{domain.StatusPausing, domain.OpRequestPause, false},
		{domain.StatusPaused, domain.OpRequestPause, false},
		{domain.StatusQueued, domain.OpRequestCancel, true},
		{domain.StatusCancelling, domain.OpRequestCancel, false},
		{domain.StatusCompleted, domain.OpRequestCancel, false},
		{domain.StatusIdle, domain.OpEnableSkill, true},
		{domain.StatusRunning, domain.OpEnableSkill, false},
		{domain.StatusFailed, domain.OpRetry, true},
		{domain.StatusCompleted, domain.OpUpdateMetrics, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s", tt.status, tt.op), func(t *testing.T) {
			assert.Equal(t, tt.want, domain.CanPerform(tt.status, tt.op))
		})
	}
	// Intermediate statuses refuse every lifecycle request.
	for _, st := range domain.AllSessionStatuses() {
		if !st.IsIntermediate() {
			continue
		}
		for _, op := range []domain.Operation{domain.OpRequestInterrupt, domain.OpRequestPause, domain.OpRequestResume, domain.OpRequestCancel} {
			assert.False(t, domain.CanPerform(st, op), "%s in %s", op, st)
		}
	}
	assert.True(t, errors.Is(&domain.TransitionError{Reason: domain.ErrBudgetExhausted}, domain.ErrBudgetExhausted))
}
