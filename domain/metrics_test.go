package domain_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
)

func usage(model string, cost domain.USD, in, out int64, ctxTokens int64) domain.MetricsUpdate {
	return domain.MetricsUpdate{ModelID: model, Cost: cost,
		Tokens:        domain.TokenUsage{InputTokens: in, OutputTokens: out, CacheReadTokens: 1, CacheWriteTokens: 2},
		ContextWindow: domain.ContextWindowSnapshot{InputTokens: ctxTokens, ModelContextLimit: 200000, RecordedAt: t0}}
}

func mustUSD(t *testing.T, s string) domain.USD {
	t.Helper()
	u, err := domain.ParseUSD(s)
	require.NoError(t, err)
	return u
}

func TestMetricsSumCostAndTokensReplaceSnapshot(t *testing.T) {
	t.Parallel()
	s := runningSession(t)
	require.NoError(t, s.UpdateMetrics(usage("opus", mustUSD(t, "0.10"), 100, 10, 50000), t0))
	require.NoError(t, s.UpdateMetrics(usage("opus", mustUSD(t, "0.25"), 200, 20, 80000), t0))
	require.NoError(t, s.UpdateMetrics(usage("sonnet", mustUSD(t, "0.000001"), 5, 5, 30000), t0))

	m := s.Metrics()
	assert.Equal(t, mustUSD(t, "0.350001"), m.TotalCostUsd, "cost is summed exactly")
	assert.Equal(t, m.TotalCostUsd, s.Budget().EstimatedCostUsd, "budget spend and metrics stay in sync")
	assert.Equal(t, domain.TokenUsage{InputTokens: 300, OutputTokens: 30, CacheReadTokens: 2, CacheWriteTokens: 4}, m.TokenUsageByModel["opus"])
	assert.Equal(t, domain.TokenUsage{InputTokens: 5, OutputTokens: 5, CacheReadTokens: 1, CacheWriteTokens: 2}, m.TokenUsageByModel["sonnet"])
	assert.Equal(t, m.TotalTokens(), s.Budget().TokensUsed)
	require.NotNil(t, m.ContextWindow)
	assert.Equal(t, int64(30000), m.ContextWindow.TotalTokens(), "the snapshot is replaced, not summed")
	assert.InDelta(t, 15.0, m.ContextWindowUsagePercent(), 1e-9)

	events := s.PopEvents()
	require.Len(t, events, 3)
	last := events[2].(domain.SessionMetricsUpdatedEvent)
	assert.Equal(t, mustUSD(t, "0.350001"), last.TotalCostUsd)
	assert.InDelta(t, 15.0, last.ContextWindowUsagePercent, 1e-9)
}

func TestMetricsSubAgentRollUp(t *testing.T) {
	t.Parallel()
	s := runningSession(t)
	sub := uuid.MustParse("00000000-0000-4000-8000-0000000000b1")
	require.NoError(t, s.UpdateMetrics(usage("opus", domain.Dollars(1), 100, 0, 90000), t0))
	u := usage("haiku", domain.Dollars(2), 40, 0, 12000)
	u.SubAgentID = &sub
	require.NoError(t, s.UpdateMetrics(u, t0))
	require.NoError(t, s.UpdateMetrics(u, t0))

	m := s.Metrics()
	assert.Equal(t, domain.Dollars(5), m.TotalCostUsd, "subagent cost rolls up into the parent")
	assert.Equal(t, int64(80), m.TokenUsageByModel["haiku"].InputTokens, "subagent tokens roll up into the parent")
	assert.Equal(t, int64(90000), m.ContextWindow.InputTokens, "the parent's context window ignores the subagent's")
	sm := m.SubAgentMetrics[sub]
	assert.Equal(t, domain.Dollars(4), sm.TotalCostUsd)
	assert.Equal(t, int64(80), sm.TokenUsageByModel["haiku"].InputTokens)
	require.NotNil(t, sm.ContextWindow)
	assert.Equal(t, int64(12000), sm.ContextWindow.InputTokens, "the subagent's own snapshot is replaced")
}

func TestMetricsTurnCount(t *testing.T) {
	t.Parallel()
	s := runningSession(t)
	require.NoError(t, s.RecordTurnCompleted(t0.Add(1)))
	require.NoError(t, s.BeginTurn(t0.Add(2)))
	require.NoError(t, s.RecordOutput(domain.SessionOutput{}, t0.Add(3)))
	m := s.Metrics()
	assert.Equal(t, 2, m.TurnCount)
	require.NotNil(t, m.LastTurnAt)
	assert.Equal(t, t0.Add(3), *m.LastTurnAt)
}

func TestBudgetWarningFiresOnceAndExhaustionPauses(t *testing.T) {
	t.Parallel()
	s := runningSession(t) // cap $10, warn at 80%
	steps := []struct {
		cost       string
		wantEvents []string
		wantStatus domain.SessionStatus
	}{
		{"7.99", []string{"session_metrics_updated"}, domain.StatusRunning},
		{"0.01", []string{"session_metrics_updated", "session_budget_warning"}, domain.StatusRunning},
		{"1", []string{"session_metrics_updated"}, domain.StatusRunning},
		{"1", []string{"session_metrics_updated", "session_budget_exhausted", "session_pause_requested"}, domain.StatusPausing},
		{"0.5", []string{"session_metrics_updated"}, domain.StatusPausing},
	}
	for _, step := range steps {
		require.NoError(t, s.UpdateMetrics(usage("opus", mustUSD(t, step.cost), 1, 1, 10), t0))
		events := s.PopEvents()
		assert.Equal(t, step.wantEvents, eventTypes(events), "after spending %s", step.cost)
		assert.Equal(t, step.wantStatus, s.Status())
		for _, e := range events {
			switch e := e.(type) {
			case domain.SessionBudgetWarningEvent:
				assert.Equal(t, domain.Dollars(8), e.SpentUsd)
				assert.Equal(t, domain.Dollars(10), e.CapUsd)
				assert.InDelta(t, 80.0, e.PercentUsed, 1e-9)
			case domain.SessionBudgetExhaustedEvent:
				assert.Equal(t, domain.Dollars(10), e.SpentUsd)
			case domain.SessionPauseRequestedEvent:
				assert.Equal(t, domain.PauseBudgetExhausted, e.Reason)
			}
		}
	}
	assert.Equal(t, mustUSD(t, "10.5"), s.Budget().EstimatedCostUsd, "real spend is kept even past the cap")
}

func TestSpentBudgetBlocksRunningUntilRaised(t *testing.T) {
	t.Parallel()
	s := runningSession(t)
	require.NoError(t, s.UpdateMetrics(usage("opus", domain.Dollars(10), 1, 1, 10), t0))
	require.NoError(t, s.ConfirmPaused(awaited(t, s, domain.SidecarPause), t0))
	err := s.RequestResume(t0)
	require.ErrorIs(t, err, domain.ErrBudgetExhausted)
	require.ErrorIs(t, err, domain.ErrConflict)
	assert.Equal(t, domain.StatusPaused, s.Status())

	require.ErrorIs(t, s.RaiseBudget(domain.Dollars(10), t0), domain.ErrValidation, "the cap only goes up")
	require.NoError(t, s.RaiseBudget(domain.Dollars(20), t0))
	require.NoError(t, s.RequestResume(t0))
	require.NoError(t, s.ConfirmResumed(awaited(t, s, domain.SidecarResume), t0))
	assert.Equal(t, domain.StatusRunning, s.Status())
	s.PopEvents()

	// The new cap re-arms the warning (80% of 20 = 16) and the exhaustion.
	require.NoError(t, s.UpdateMetrics(usage("opus", domain.Dollars(6), 1, 1, 10), t0))
	assert.Equal(t, []string{"session_metrics_updated", "session_budget_warning"}, eventTypes(s.PopEvents()))
	require.NoError(t, s.UpdateMetrics(usage("opus", domain.Dollars(4), 1, 1, 10), t0))
	assert.Equal(t, []string{"session_metrics_updated", "session_budget_exhausted", "session_pause_requested"}, eventTypes(s.PopEvents()))
}

func TestSpentBudgetGuardsEveryWayIntoRunning(t *testing.T) {
	t.Parallel()
	spend := func(snap *domain.AgentSessionSnapshot) {
		snap.Budget.EstimatedCostUsd, snap.Budget.ExhaustionRaised, snap.Budget.WarningRaised = snap.Budget.HardCapUsd, true, true
	}
	tests := []struct {
		name   string
		status domain.SessionStatus
		call   func(*domain.AgentSession) error
	}{
		{"start", domain.StatusQueued, func(s *domain.AgentSession) error { return s.Start(t0) }},
		{"follow-up turn", domain.StatusIdle, func(s *domain.AgentSession) error { return s.BeginTurn(t0) }},
		{"answer", domain.StatusWaitingForInput, func(s *domain.AgentSession) error { return s.RecordUserQuestionAnswered("yes", t0) }},
		{"plan approval", domain.StatusWaitingForApproval, func(s *domain.AgentSession) error { return s.RecordPlanApproved(t0) }},
		{"resume", domain.StatusPaused, func(s *domain.AgentSession) error { return s.RequestResume(t0) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			snap := snapshotIn(t, tt.status)
			spend(&snap)
			s := load(t, snap)
			err := tt.call(s)
			require.ErrorIs(t, err, domain.ErrBudgetExhausted)
			assert.Equal(t, tt.status, s.Status())
		})
	}

	t.Run("a resume ack after the cap was spent pauses again", func(t *testing.T) {
		t.Parallel()
		snap := snapshotIn(t, domain.StatusResuming)
		spend(&snap)
		awaiting(domain.SidecarResume)(&snap)
		s := load(t, snap)
		require.NoError(t, s.ConfirmResumed(ackID, t0))
		assert.Equal(t, domain.StatusPausing, s.Status())
		assert.Equal(t, []string{"session_resumed", "session_pause_requested"}, eventTypes(s.PopEvents()))
	})
}

func TestMetricsUpdateValidation(t *testing.T) {
	t.Parallel()
	nilSub := uuid.Nil
	tests := []struct {
		name   string
		mutate func(*domain.MetricsUpdate)
	}{
		{"no model", func(u *domain.MetricsUpdate) { u.ModelID = "" }},
		{"negative cost", func(u *domain.MetricsUpdate) { u.Cost = -1 }},
		{"negative tokens", func(u *domain.MetricsUpdate) { u.Tokens.OutputTokens = -1 }},
		{"no context limit", func(u *domain.MetricsUpdate) { u.ContextWindow.ModelContextLimit = 0 }},
		{"nil subagent id", func(u *domain.MetricsUpdate) { u.SubAgentID = &nilSub }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := runningSession(t)
			u := usage("opus", 1, 1, 1, 1)
			tt.mutate(&u)
			require.ErrorIs(t, s.UpdateMetrics(u, t0), domain.ErrValidation)
			assert.Zero(t, s.Metrics().TotalCostUsd)
			assert.Empty(t, s.PopEvents())
		})
	}
}
