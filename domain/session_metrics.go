package domain

import (
	"time"
)

// UpdateMetrics records one usage report. Cost and tokens are summed (a
// subagent's also roll up into the session); the context window snapshot
// is replaced, the parent's or the subagent's own, never summed. Spend is
// a fact, so it is recorded in every status. Then the budget rules apply:
// crossing WarnAtPercent raises SessionBudgetWarningEvent once, reaching
// the hard cap raises SessionBudgetExhaustedEvent once and asks a
// Running session to pause (Running -> Pausing).
func (s *AgentSession) UpdateMetrics(u MetricsUpdate, now time.Time) error {
	if err := s.allow(OpUpdateMetrics); err != nil {
		return err
	}
	if err := u.validate(); err != nil {
		return err
	}
	budget := s.budget
	budget.EstimatedCostUsd += u.Cost
	budget.TokensUsed += u.Tokens.TotalTokens()
	exhaustNow := budget.IsSpent() && !budget.ExhaustionRaised
	c := CaseNone
	if exhaustNow {
		c = CaseHardCapReached
	}
	to, err := s.target(OpUpdateMetrics, c)
	if err != nil {
		return err
	}

	s.metrics.apply(u)
	s.updatedAt = now.UTC()
	s.raise(SessionMetricsUpdatedEvent{
		SessionMeta: s.meta(now), TotalCostUsd: s.metrics.TotalCostUsd,
		ContextWindowUsagePercent: s.metrics.ContextWindowUsagePercent(), TurnCount: s.metrics.TurnCount,
		SubAgentID: clonePtr(u.SubAgentID),
	})
	if budget.warnReached() && !budget.WarningRaised {
		budget.WarningRaised = true
		s.raise(SessionBudgetWarningEvent{
			SessionMeta: s.meta(now), SpentUsd: budget.EstimatedCostUsd, CapUsd: budget.HardCapUsd,
			PercentUsed: budget.PercentUsed(),
		})
	}
	if exhaustNow {
		budget.ExhaustionRaised = true
		s.raise(SessionBudgetExhaustedEvent{SessionMeta: s.meta(now), SpentUsd: budget.EstimatedCostUsd, CapUsd: budget.HardCapUsd})
	}
	s.budget = budget
	if to != s.status {
		s.moveTo(to, now)
		s.stopForBudget(now)
	}
	return nil
}

// stopForBudget raises the request of the control that stops a session
// whose cap is spent, once its moves took the session there.
func (s *AgentSession) stopForBudget(now time.Time) {
	for _, c := range controls {
		if c.budgetStop != nil {
			c.budgetStop(s, now)
		}
	}
}

// RaiseBudget sets a higher hard cap. It re-arms the warning and the
// exhaustion for the new cap, so a session stopped by its cap can be
// resumed and is warned again before the new cap. Lowering is refused:
// the cap protects the owner, and a lower cap could already be exceeded.
func (s *AgentSession) RaiseBudget(newCap USD, now time.Time) error {
	if err := s.allow(OpRaiseBudget); err != nil {
		return err
	}
	if newCap <= s.budget.HardCapUsd {
		return invalid("budget.hardCapUsd", "must be greater than the current cap %s", s.budget.HardCapUsd)
	}
	previous := s.budget.HardCapUsd
	s.budget.HardCapUsd = newCap
	s.budget.WarningRaised = s.budget.warnReached()
	s.budget.ExhaustionRaised = s.budget.IsSpent()
	s.updatedAt = now.UTC()
	s.raise(SessionBudgetRaisedEvent{SessionMeta: s.meta(now), PreviousCapUsd: previous, CapUsd: newCap, SpentUsd: s.budget.EstimatedCostUsd})
	return nil
}
