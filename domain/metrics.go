package domain

import (
	"maps"
	"time"

	"github.com/google/uuid"
)

// TokenUsage counts the tokens of one usage report. It is aggregatable:
// reports are summed per model, and a subagent's usage rolls up into its
// parent session.
type TokenUsage struct {
	InputTokens      int64 `json:"inputTokens"`
	OutputTokens     int64 `json:"outputTokens"`
	CacheReadTokens  int64 `json:"cacheReadTokens"`
	CacheWriteTokens int64 `json:"cacheWriteTokens"`
}

// TotalTokens is the sum of the four counts.
func (t TokenUsage) TotalTokens() int64 {
	return t.InputTokens + t.OutputTokens + t.CacheReadTokens + t.CacheWriteTokens
}

// Add returns the sum of t and o.
func (t TokenUsage) Add(o TokenUsage) TokenUsage {
	return TokenUsage{
		InputTokens:      t.InputTokens + o.InputTokens,
		OutputTokens:     t.OutputTokens + o.OutputTokens,
		CacheReadTokens:  t.CacheReadTokens + o.CacheReadTokens,
		CacheWriteTokens: t.CacheWriteTokens + o.CacheWriteTokens,
	}
}

// Validate checks no count is negative.
func (t TokenUsage) Validate() error {
	if t.InputTokens < 0 || t.OutputTokens < 0 || t.CacheReadTokens < 0 || t.CacheWriteTokens < 0 {
		return invalid("tokenUsage", "token counts must not be negative")
	}
	return nil
}

// ContextWindowSnapshot is the current size of a context window. It is NOT
// aggregatable: each report replaces the previous snapshot, because the
// engine reports the whole current context, not a delta.
type ContextWindowSnapshot struct {
	InputTokens       int64     `json:"inputTokens"`
	OutputTokens      int64     `json:"outputTokens"`
	CacheReadTokens   int64     `json:"cacheReadTokens"`
	CacheWriteTokens  int64     `json:"cacheWriteTokens"`
	ModelContextLimit int64     `json:"modelContextLimit"`
	RecordedAt        time.Time `json:"recordedAt"`
}

// TotalTokens is the sum of the four counts.
func (c ContextWindowSnapshot) TotalTokens() int64 {
	return c.InputTokens + c.OutputTokens + c.CacheReadTokens + c.CacheWriteTokens
}

// UsagePercent is TotalTokens as a percentage of ModelContextLimit.
func (c ContextWindowSnapshot) UsagePercent() float64 {
	if c.ModelContextLimit <= 0 {
		return 0
	}
	return float64(c.TotalTokens()) / float64(c.ModelContextLimit) * 100
}

// Validate checks counts are not negative and the limit is positive.
func (c ContextWindowSnapshot) Validate() error {
	if c.InputTokens < 0 || c.OutputTokens < 0 || c.CacheReadTokens < 0 || c.CacheWriteTokens < 0 {
		return invalid("contextWindow", "token counts must not be negative")
	}
	if c.ModelContextLimit <= 0 {
		return invalid("contextWindow.modelContextLimit", "must be positive")
	}
	return nil
}

// SubAgentMetrics are one subagent's own numbers. Its cost and tokens are
// also counted in the parent's totals; its context window is not.
type SubAgentMetrics struct {
	TotalCostUsd      USD                    `json:"totalCostUsd"`
	TokenUsageByModel map[string]TokenUsage  `json:"tokenUsageByModel"`
	ContextWindow     *ContextWindowSnapshot `json:"contextWindow,omitempty"`
}

// SessionMetrics are the session's running totals and its latest context
// window snapshot.
type SessionMetrics struct {
	// TotalCostUsd sums every turn and every subagent.
	TotalCostUsd USD `json:"totalCostUsd"`
	// TokenUsageByModel sums tokens per model id, subagents included.
	TokenUsageByModel map[string]TokenUsage `json:"tokenUsageByModel"`
	// ContextWindow is the parent's latest snapshot; nil before the first report.
	ContextWindow *ContextWindowSnapshot `json:"contextWindow,omitempty"`
	// SubAgentMetrics holds each subagent's own numbers.
	SubAgentMetrics map[uuid.UUID]SubAgentMetrics `json:"subAgentMetrics"`
	// TurnCount counts the turns that ended (Running -> Idle).
	TurnCount int `json:"turnCount"`
	// LastTurnAt is when the last turn ended.
	LastTurnAt *time.Time `json:"lastTurnAt,omitempty"`
}

// ContextWindowUsagePercent is the parent's current context usage (0 before
// the first report).
func (m SessionMetrics) ContextWindowUsagePercent() float64 {
	if m.ContextWindow == nil {
		return 0
	}
	return m.ContextWindow.UsagePercent()
}

// TotalTokens sums the tokens of every model.
func (m SessionMetrics) TotalTokens() int64 {
	var n int64
	for _, t := range m.TokenUsageByModel {
		n += t.TotalTokens()
	}
	return n
}

func (m SessionMetrics) clone() SessionMetrics {
	c := m
	c.TokenUsageByModel = maps.Clone(m.TokenUsageByModel)
	c.ContextWindow = clonePtr(m.ContextWindow)
	c.LastTurnAt = clonePtr(m.LastTurnAt)
	if m.SubAgentMetrics != nil {
		c.SubAgentMetrics = make(map[uuid.UUID]SubAgentMetrics, len(m.SubAgentMetrics))
		for id, s := range m.SubAgentMetrics {
			s.TokenUsageByModel = maps.Clone(s.TokenUsageByModel)
			s.ContextWindow = clonePtr(s.ContextWindow)
			c.SubAgentMetrics[id] = s
		}
	}
	return c
}

// MetricsUpdate is one usage report from the engine, for the session or
// one of its subagents.
type MetricsUpdate struct {
	// SubAgentID is set when the report is a subagent's.
	SubAgentID *uuid.UUID
	// ModelID is the model that spent the tokens.
	ModelID string
	// Cost is what the report's turn cost.
	Cost USD
	// Tokens is the turn's token usage (summed into the totals).
	Tokens TokenUsage
	// ContextWindow is the current context size (replaces the snapshot).
	ContextWindow ContextWindowSnapshot
}

func (u MetricsUpdate) validate() error {
	if u.ModelID == "" {
		return invalid("modelId", "must not be empty")
	}
	if u.Cost < 0 {
		return invalid("costUsd", "must not be negative")
	}
	if u.SubAgentID != nil && *u.SubAgentID == uuid.Nil {
		return invalid("subAgentId", "must be a valid id when set")
	}
	if err := u.Tokens.Validate(); err != nil {
		return err
	}
	return u.ContextWindow.Validate()
}

// apply sums cost and tokens, replaces the right context window and, for
// a subagent, rolls its cost and tokens up into the parent totals.
func (m *SessionMetrics) apply(u MetricsUpdate) {
	if m.TokenUsageByModel == nil {
		m.TokenUsageByModel = map[string]TokenUsage{}
	}
	m.TotalCostUsd += u.Cost
	m.TokenUsageByModel[u.ModelID] = m.TokenUsageByModel[u.ModelID].Add(u.Tokens)
	snapshot := u.ContextWindow
	if u.SubAgentID == nil {
		m.ContextWindow = &snapshot
		return
	}
	if m.SubAgentMetrics == nil {
		m.SubAgentMetrics = map[uuid.UUID]SubAgentMetrics{}
	}
	sub := m.SubAgentMetrics[*u.SubAgentID]
	if sub.TokenUsageByModel == nil {
		sub.TokenUsageByModel = map[string]TokenUsage{}
	}
	sub.TotalCostUsd += u.Cost
	sub.TokenUsageByModel[u.ModelID] = sub.TokenUsageByModel[u.ModelID].Add(u.Tokens)
	sub.ContextWindow = &snapshot
	m.SubAgentMetrics[*u.SubAgentID] = sub
}
