package domain_test

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
)

func TestUSD(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		nanos   int64
		out     string
		invalid bool
	}{
		{in: "0", nanos: 0, out: "0"},
		{in: "12.5", nanos: 12_500_000_000, out: "12.5"},
		{in: "0.000000001", nanos: 1, out: "0.000000001"},
		{in: ".25", nanos: 250_000_000, out: "0.25"},
		{in: "-3", nanos: -3_000_000_000, out: "-3"},
		{in: "1.0000000001", invalid: true},
		{in: "1e3", invalid: true},
		{in: "abc", invalid: true},
		{in: "", invalid: true},
		{in: "99999999999999", invalid: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			u, err := domain.ParseUSD(tt.in)
			if tt.invalid {
				require.ErrorIs(t, err, domain.ErrValidation)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.nanos, u.Nanos())
			assert.Equal(t, tt.out, u.String())
			b, err := json.Marshal(u)
			require.NoError(t, err)
			var back domain.USD
			require.NoError(t, json.Unmarshal(b, &back))
			assert.Equal(t, u, back)
		})
	}
	f, err := domain.USDFromFloat(0.1 + 0.2)
	require.NoError(t, err)
	assert.Equal(t, "0.3", f.String(), "floats from the engine are rounded to the nano-dollar")
	assert.InDelta(t, 0.3, f.Float64(), 1e-12)
	_, err = domain.USDFromFloat(math.NaN())
	require.ErrorIs(t, err, domain.ErrValidation)
	var fromString domain.USD
	require.NoError(t, json.Unmarshal([]byte(`"7.25"`), &fromString))
	assert.Equal(t, domain.Dollars(7)+domain.USD(250_000_000), fromString)
}

func TestEnumsAndHelpers(t *testing.T) {
	t.Parallel()
	for _, st := range domain.AllSessionStatuses() {
		parsed, err := domain.ParseSessionStatus(st.String())
		require.NoError(t, err)
		assert.Equal(t, st, parsed)
		assert.NotEmpty(t, domain.AllowedOperations(st), "%s allows at least one operation", st)
	}
	_, err := domain.ParseSessionStatus("")
	require.ErrorIs(t, err, domain.ErrValidation, "the zero value is not a status")
	assert.ElementsMatch(t, []domain.Operation{domain.OpRequestResume, domain.OpRequestCancel, domain.OpExpirePause,
		domain.OpRecordFailure, domain.OpRecordLogChunk, domain.OpConfirmReloaded, domain.OpUpdateMetrics, domain.OpRaiseBudget,
		domain.OpAssignToChain, domain.OpRecordAgentMessage, domain.OpRecordToolCall, domain.OpRecordToolCallResult,
		domain.OpStartSubAgent, domain.OpCompleteSubAgent, domain.OpFailSubAgent, domain.OpIssueSidecarKey}, domain.AllowedOperations(domain.StatusPaused))
	assert.Len(t, domain.SessionOperations(), 53)

	threshold := 101.0
	for name, c := range map[string]domain.AutoContinueConfig{
		"coverage above 100": {MaxContinuations: 1, ValidationCriteria: []domain.ValidationCriterion{{Type: domain.ValidationCoverageThreshold, Threshold: &threshold}}},
		"no custom command":  {MaxContinuations: 1, ValidationCriteria: []domain.ValidationCriterion{{Type: domain.ValidationCustomCommand}}},
		"unknown type":       {MaxContinuations: 1, ValidationCriteria: []domain.ValidationCriterion{{Type: "Vibes"}}},
		"negative count":     {MaxContinuations: 1, CurrentContinuationCount: -1},
	} {
		assert.ErrorIs(t, c.Validate(), domain.ErrValidation, name)
	}
}
