package domain

// DefaultWarnAtPercent is the share of the cap at which the owner is warned.
const DefaultWarnAtPercent = 80

// SessionBudget is a session's spending cap and what it spent so far.
// EstimatedCostUsd always equals the session's Metrics.TotalCostUsd: both
// are set by UpdateMetrics, one drives enforcement, the other reporting.
type SessionBudget struct {
	// HardCapUsd is the most the session may spend; > 0.
	HardCapUsd USD `json:"hardCapUsd"`
	// WarnAtPercent is the share of the cap (1-99) that raises a warning.
	WarnAtPercent int `json:"warnAtPercent"`
	// TokensUsed is the total number of tokens spent.
	TokensUsed int64 `json:"tokensUsed"`
	// EstimatedCostUsd is the total spent.
	EstimatedCostUsd USD `json:"estimatedCostUsd"`
	// WarningRaised records that the warning for the current cap was
	// raised, so it fires once.
	WarningRaised bool `json:"warningRaised"`
	// ExhaustionRaised records that exhaustion of the current cap was
	// raised, so the event and the pause request fire once.
	ExhaustionRaised bool `json:"exhaustionRaised"`
}

// NewSessionBudget returns a budget with the cap and warning threshold
// (0 means DefaultWarnAtPercent).
func NewSessionBudget(hardCap USD, warnAtPercent int) (SessionBudget, error) {
	if warnAtPercent == 0 {
		warnAtPercent = DefaultWarnAtPercent
	}
	b := SessionBudget{HardCapUsd: hardCap, WarnAtPercent: warnAtPercent}
	return b, b.Validate()
}

// Validate checks the cap is positive and the threshold within 1-99.
func (b SessionBudget) Validate() error {
	if b.HardCapUsd <= 0 {
		return invalid("budget.hardCapUsd", "must be greater than 0")
	}
	if b.WarnAtPercent < 1 || b.WarnAtPercent > 99 {
		return invalid("budget.warnAtPercent", "must be between 1 and 99")
	}
	return nil
}

// IsSpent reports whether the spend reached the hard cap: such a session
// may not run until the cap is raised.
func (b SessionBudget) IsSpent() bool { return b.EstimatedCostUsd >= b.HardCapUsd }

// PercentUsed is the spend as a percentage of the cap.
func (b SessionBudget) PercentUsed() float64 { return percentOf(b.EstimatedCostUsd, b.HardCapUsd) }

// warnReached reports whether the spend crossed WarnAtPercent, computed
// in integers so the threshold is exact.
func (b SessionBudget) warnReached() bool {
	return int64(b.EstimatedCostUsd)*100 >= int64(b.HardCapUsd)*int64(b.WarnAtPercent)
}

// Remaining is what may still be spent (0 once spent).
func (b SessionBudget) Remaining() USD {
	if b.IsSpent() {
		return 0
	}
	return b.HardCapUsd - b.EstimatedCostUsd
}
