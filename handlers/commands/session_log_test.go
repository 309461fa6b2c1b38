package commands_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
)

func TestLogDecisionAppendsOneChunkPerCommand(t *testing.T) {
	h := startWorker(t, 4)
	id := uuid.New()
	h.session(t, command.StartSession, id, command.StartSessionData{WorkingDirectory: "/work/repo", Objective: "Tidy the logs",
		BudgetCapUsd: domain.Dollars(10)})
	ctx := context.Background()

	r := h.send(t, domain.AggregateSession, command.LogDecision, id, h.owner.String(), command.LogDecisionData{Content: "Too early"})
	e, ok := command.AsError(r.Err())
	require.True(t, ok, "a Queued session has no log yet")
	assert.Equal(t, command.KindConflict, e.Kind)
	assert.Equal(t, string(domain.StatusQueued), e.CurrentStatus)

	h.internal(t, command.AllocateSession, id, nil)
	cmd, err := command.New(domain.AggregateSession, command.LogDecision, id, h.owner.String(), command.LogDecisionData{Content: "Keep the layout"})
	require.NoError(t, err)
	for range 2 {
		wait, cancel := context.WithTimeout(ctx, 30*time.Second)
		r, err := h.client.Do(wait, cmd)
		cancel()
		require.NoError(t, err)
		require.NoError(t, r.Err())
	}
	var n int
	var kind, content string
	require.NoError(t, h.pool.QueryRow(ctx, "SELECT count(*), min(kind), min(content) FROM session_log_chunks WHERE session_id = $1 AND id = $2",
		id, cmd.ID).Scan(&n, &kind, &content))
	assert.Equal(t, 1, n, "a repeated command appends nothing")
	assert.Equal(t, []string{"decision", "Keep the layout"}, []string{kind, content})

	tests := []struct {
		name  string
		owner string
		data  command.LogDecisionData
		kind  string
	}{
		{"another owner's session", uuid.NewString(), command.LogDecisionData{Content: "Mine"}, command.KindNotFound},
		{"empty", h.owner.String(), command.LogDecisionData{}, command.KindValidation},
		{"over 2000 characters", h.owner.String(), command.LogDecisionData{Content: strings.Repeat("x", 2001)}, command.KindValidation},
	}
	for _, tt := range tests {
		r := h.send(t, domain.AggregateSession, command.LogDecision, id, tt.owner, tt.data)
		e, ok := command.AsError(r.Err())
		require.True(t, ok, tt.name)
		assert.Equal(t, tt.kind, e.Kind, tt.name)
	}
	require.NoError(t, h.pool.QueryRow(ctx, "SELECT count(*) FROM session_log_chunks WHERE session_id = $1", id).Scan(&n))
	assert.Equal(t, 1, n, "refused commands append nothing")
}
