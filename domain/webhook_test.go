package domain

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWebhookEventTypesAreTheSessionsEvents(t *testing.T) {
	t.Parallel()
	types := WebhookEventTypes()
	for _, want := range []Event{SessionWaitingForInputEvent{}, AgentSessionFailedEvent{}, AgentSessionOutputReadyEvent{},
		AgentSessionApprovedEvent{}, SessionBudgetWarningEvent{}} {
		assert.Contains(t, types, want.EventType())
	}
	assert.NotContains(t, types, SessionChainCompletedEvent{}.EventType(), "a chain's event")
}

func TestValidateWebhookEventTypes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		types []string
		want  string
	}{
		{"none: all", nil, ""},
		{"session events", []string{AgentSessionFailedEvent{}.EventType(), SessionWaitingForInputEvent{}.EventType()}, ""},
		{"unknown", []string{"session_exploded"}, "not an event type of a session"},
		{"a template's", []string{AgentTemplateCreatedEvent{}.EventType()}, "not an event type of a session"},
		{"twice", []string{AgentSessionFailedEvent{}.EventType(), AgentSessionFailedEvent{}.EventType()}, "twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateWebhookEventTypes(tt.types)
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			var v *ValidationError
			require.True(t, errors.As(err, &v), "%v", err)
			assert.Equal(t, "eventTypes", v.Field())
			assert.Contains(t, v.Error(), tt.want)
		})
	}
}

func TestWebhookRetryDelay(t *testing.T) {
	t.Parallel()
	schedule := []time.Duration{10 * time.Second, time.Minute}
	d, ok := WebhookRetryDelay(schedule, 1, 0.5)
	assert.True(t, ok)
	assert.Equal(t, 10*time.Second, d, "no spread in the middle")
	d, _ = WebhookRetryDelay(schedule, 2, 0)
	assert.Equal(t, 48*time.Second, d, "-20%")
	d, _ = WebhookRetryDelay(schedule, 2, 0.999999)
	assert.InDelta(t, float64(72*time.Second), float64(d), float64(time.Millisecond), "+20%")
	_, ok = WebhookRetryDelay(schedule, 3, 0.5)
	assert.False(t, ok, "the schedule is exhausted after its last wait")
	var total time.Duration
	for _, w := range DefaultWebhookRetrySchedule {
		total += w
	}
	assert.Greater(t, total, 24*time.Hour, "retries go on for hours")
}
