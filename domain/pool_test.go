package domain_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
)

func TestSessionPool(t *testing.T) {
	t.Parallel()
	pool, err := domain.NewSessionPool(domain.SessionPoolConfig{})
	require.NoError(t, err)
	assert.Equal(t, domain.DefaultMaxConcurrentSessions, pool.MaxCount())
	_, err = domain.NewSessionPool(domain.SessionPoolConfig{MaxConcurrentSessions: -1})
	require.ErrorIs(t, err, domain.ErrValidation)

	tests := []struct {
		name       string
		active     int
		wantErr    error
		wantStatus domain.SessionStatus
		wantEvents []string
	}{
		{"free slot", 19, nil, domain.StatusRunning, []string{"session_allocated", "agent_session_started"}},
		{"full", 20, domain.ErrPoolExhausted, domain.StatusQueued, []string{"session_pool_exhausted"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newSession(t)
			assert.Equal(t, tt.wantErr == nil, pool.CanAllocate(tt.active))
			err := pool.Allocate(s, tt.active, t0)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				require.ErrorIs(t, err, domain.ErrConflict)
				var pe *domain.PoolExhaustedError
				require.ErrorAs(t, err, &pe)
				assert.Equal(t, "Queued", pe.CurrentStatus())
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.wantStatus, s.Status())
			events := s.PopEvents()
			assert.Equal(t, tt.wantEvents, eventTypes(events))
			switch e := events[0].(type) {
			case domain.SessionAllocatedEvent:
				assert.Equal(t, 20, e.ActiveCount)
				assert.Equal(t, 20, e.MaxCount)
			case domain.SessionPoolExhaustedEvent:
				assert.Equal(t, 20, e.CurrentCount)
			}
		})
	}

	t.Run("start errors allocate nothing", func(t *testing.T) {
		t.Parallel()
		s, err := domain.NewAgentSession(newSessionParams())
		require.NoError(t, err)
		s.PopEvents()
		require.ErrorIs(t, pool.Allocate(s, 0, t0), domain.ErrNoAPIKey)
		assert.Empty(t, s.PopEvents())
		running := runningSession(t)
		require.ErrorIs(t, pool.Allocate(running, 0, t0), domain.ErrInvalidTransition)
	})

	t.Run("release", func(t *testing.T) {
		t.Parallel()
		s := runningSession(t)
		require.ErrorIs(t, pool.Release(s, 3, t0), domain.ErrInvalidTransition, "a running session holds its slot")
		require.NoError(t, s.RecordFailure(domain.FailureInfrastructureError, "", t0))
		s.PopEvents()
		require.NoError(t, pool.Release(s, 3, t0))
		e := s.PopEvents()[0].(domain.SessionReleasedEvent)
		assert.Equal(t, 3, e.ActiveCount)
	})

	u := pool.Utilization(5)
	assert.Equal(t, domain.SessionPoolUtilization{ActiveCount: 5, MaxCount: 20, AvailableSlots: 15, UtilizationPercent: 25}, u)
	assert.ElementsMatch(t, []domain.SessionStatus{domain.StatusRunning, domain.StatusInterrupting, domain.StatusInterrupted,
		domain.StatusPausing, domain.StatusPaused, domain.StatusResuming, domain.StatusCancelling,
		domain.StatusWaitingForInput, domain.StatusWaitingForApproval, domain.StatusIdle}, domain.PoolSlotStatuses())
}

func TestSessionPoolConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		max   int
		valid bool
	}{
		{"one", 1, true},
		{"default size", domain.DefaultMaxConcurrentSessions, true},
		{"largest", domain.MaxMaxConcurrentSessions, true},
		{"zero is no default when a user sets it", 0, false},
		{"negative", -3, false},
		{"too large", domain.MaxMaxConcurrentSessions + 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := domain.SessionPoolConfig{MaxConcurrentSessions: tt.max}.Validate()
			if tt.valid {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, domain.ErrValidation)
			var ve *domain.ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, "maxConcurrentSessions", ve.Field())
		})
	}
}
