package commands_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
)

// TestDataPostgresRefusesIsRefusedAtOnce: a NUL character passes the
// domain's checks but not Postgres (SQLSTATE 22021 in text, 22P05 in
// jsonb). Trying again cannot help, so the command is refused on its first
// delivery, within the caller's wait, and a repeat gets the same refusal.
func TestDataPostgresRefusesIsRefusedAtOnce(t *testing.T) {
	h := startWorker(t, 4)
	running := uuid.New()
	h.session(t, command.StartSession, running, command.StartSessionData{WorkingDirectory: "/work/repo", Objective: "Tidy the logs",
		BudgetCapUsd: domain.Dollars(10)})
	h.internal(t, command.AllocateSession, running, nil)

	tests := []struct {
		name string
		id   uuid.UUID
		cmd  string
		data any
	}{
		{"jsonb: a session's objective", uuid.New(), command.StartSession, command.StartSessionData{WorkingDirectory: "/work/repo",
			Objective: "Tidy\x00 the logs", BudgetCapUsd: domain.Dollars(10)}},
		{"text: an agent's decision", running, command.LogDecision, command.LogDecisionData{Content: "Keep\x00 it"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, err := command.New(domain.AggregateSession, tt.cmd, tt.id, h.owner.String(), tt.data)
			require.NoError(t, err)
			for range 2 {
				// The bound is far below the retries' backoff, far above a
				// single handling.
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				r, err := h.client.Do(ctx, cmd)
				cancel()
				require.NoError(t, err, "answered, not retried")
				e, ok := command.AsError(r.Err())
				require.True(t, ok, "refused")
				assert.Equal(t, command.KindValidation, e.Kind)
			}
		})
	}
}
