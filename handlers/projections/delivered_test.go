package projections_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
)

// queued stores a session and queues one message of each source on it, as
// the commands worker does, and returns the messages' ids.
func (s *stack) queued(t *testing.T, id uuid.UUID, contents map[domain.MessageSource]string) map[domain.MessageSource]uuid.UUID {
	t.Helper()
	ctx := context.Background()
	owner := uuid.New()
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	budget, err := domain.NewSessionBudget(domain.Dollars(5), 0)
	require.NoError(t, err)
	session, err := domain.NewAgentSession(domain.NewSessionParams{ID: id, OwnerID: owner, WorkingDirectory: "/work/repo",
		Objective: "Rotate the logs", ModelID: "claude-sonnet-4-5", Budget: budget, Now: now})
	require.NoError(t, err)
	ids := map[domain.MessageSource]uuid.UUID{}
	require.NoError(t, pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := (postgres.Sessions{}).Add(ctx, tx, session); err != nil {
			return err
		}
		_, err := postgres.Queues{}.Update(ctx, tx, id, owner, func(q *domain.SessionMessageQueue) error {
			for _, source := range []domain.MessageSource{domain.MessageFromUser, domain.MessageFromSystem, domain.MessageFromWebhook} {
				ids[source] = uuid.New()
				if _, err := q.Enqueue(ids[source], contents[source], domain.PriorityQueued, source, domain.StatusRunning, now); err != nil {
					return err
				}
			}
			return nil
		})
		return err
	}))
	return ids
}

// TestDeliveredMessagesJoinTheTranscript: a message of a person, the
// system or a webhook appears in the transcript, with its source, where
// the agent received it; a delivery of a message the queue does not hold
// adds nothing.
func TestDeliveredMessagesJoinTheTranscript(t *testing.T) {
	s := start(t, true)
	id := uuid.New()
	ids := s.queued(t, id, map[domain.MessageSource]string{
		domain.MessageFromUser:    "Keep a week of logs.",
		domain.MessageFromSystem:  "make test failed: 2 tests.",
		domain.MessageFromWebhook: "The deploy finished.",
	})
	s.raw(t, id, "assistant_message", map[string]any{"message_id": "m1", "block_type": "text", "text": "Looking at the logs."})
	s.raw(t, id, "message_delivered", map[string]any{"message_id": ids[domain.MessageFromUser].String(), "priority": "Queued"})
	s.raw(t, id, "message_delivered", map[string]any{"message_id": uuid.NewString(), "priority": "Queued"})
	s.raw(t, id, "assistant_message", map[string]any{"message_id": "m2", "block_type": "text", "text": "Keeping seven."})
	s.raw(t, id, "message_delivered", map[string]any{"message_id": ids[domain.MessageFromSystem].String(), "priority": "Queued"})
	s.raw(t, id, "message_delivered", map[string]any{"message_id": ids[domain.MessageFromWebhook].String(), "priority": "Queued"})
	s.caughtUp(t)

	assert.Equal(t, []message{
		{"Agent", "Looking at the logs.", false},
		{"User", "Keep a week of logs.", false},
		{"Agent", "Keeping seven.", false},
		{"System", "make test failed: 2 tests.", false},
		{"Webhook", "The deploy finished.", false},
	}, s.messages(t, id))
}

// TestSessionEndCancelsItsRunningSubagents: a subagent still running when
// its session ends ends with it; one that finished keeps its status.
func TestSessionEndCancelsItsRunningSubagents(t *testing.T) {
	s := start(t, true)
	id := uuid.New()
	for _, task := range []string{"toolu_done", "toolu_cut"} {
		s.raw(t, id, "assistant_message", map[string]any{"message_id": task, "block_type": "tool_use", "tool_use_id": task,
			"tool_name": "Task", "input": map[string]any{"description": task}})
		s.raw(t, id, "subagent_message", map[string]any{"subagent_id": "agent_" + task, "parent_tool_use_id": task,
			"message_id": "m_" + task, "text": "Working"})
	}
	s.raw(t, id, "tool_result", map[string]any{"tool_use_id": "toolu_done", "content": "done", "is_error": false})
	s.raw(t, id, "session_end", map[string]any{"status": "error", "reason": "crashed", "exit_code": 2})
	s.caughtUp(t)

	rows, err := s.pool.Query(context.Background(),
		"SELECT objective, status, completed_at IS NOT NULL FROM subagent_sessions WHERE session_id = $1 ORDER BY source_seq", id)
	require.NoError(t, err)
	type sub struct {
		Objective, Status string
		Ended             bool
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[sub])
	require.NoError(t, err)
	assert.Equal(t, []sub{{"toolu_done", "Completed", true}, {"toolu_cut", "Cancelled", true}}, got)
}
