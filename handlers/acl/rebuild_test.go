package acl_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/handlers/acl"
)

// activityRows reads every column of a session's activity stream, in order.
func (s *stack) activityRows(t *testing.T, id uuid.UUID) [][]any {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), `
		SELECT id, source_seq, raw_type, type, summary, detail, tool_name, subagent_id, tool_use_id, occurred_at
		FROM activity_items WHERE session_id = $1 ORDER BY source_seq`, id)
	require.NoError(t, err)
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		values, err := rows.Values()
		require.NoError(t, err)
		out = append(out, values)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestReplayingTheRawEventsRebuildsTheSameActivityAndChangesNothingElse
// replays a session's raw events from the start of AGENTS_SIDECAR_EVENTS
// through a second ACL worker, as a rebuild of the activity projection
// does: the activity rows come back identical, and the commands sent again
// carry the ids of the first ones, so the session is not changed twice.
func TestReplayingTheRawEventsRebuildsTheSameActivityAndChangesNothingElse(t *testing.T) {
	s := start(t)
	id := s.runningSession(t)
	s.raw(t, id, "assistant_message", map[string]any{"message_id": "m1", "block_type": "text", "text": "Looking at the logs"})
	s.raw(t, id, "assistant_message", map[string]any{"message_id": "m2", "block_type": "tool_use", "tool_use_id": "t1",
		"tool_name": "Bash", "input": map[string]any{"command": "ls /var/log"}})
	s.raw(t, id, "tool_result", map[string]any{"tool_use_id": "t1", "content": "syslog\nauth.log", "is_error": false})
	s.raw(t, id, "assistant_message", map[string]any{"message_id": "m3", "block_type": "tool_use", "tool_use_id": "t2",
		"tool_name": "TodoWrite", "input": map[string]any{"todos": []map[string]any{{"content": "Rotate", "status": "pending"}}}})
	s.raw(t, id, "usage_update", map[string]any{"input_tokens": 1200, "output_tokens": 300, "cost_usd": 0.02,
		"context_window": map[string]any{"used": 1500, "max": 200000}})
	s.raw(t, id, "no_such_event", map[string]any{"x": 1})
	s.raw(t, id, "turn_completed", map[string]any{"num_turns": 1})
	require.Eventually(t, func() bool { return len(s.activity(t, id)) == 7 }, 30*time.Second, 20*time.Millisecond)
	s.eventually(t, id, func(x *domain.AgentSession) bool { return x.Status() == domain.StatusIdle }, "the turn ended")
	before := s.activityRows(t, id)
	version := s.session(t, id).Version()

	_, err := s.pool.Exec(context.Background(), "DELETE FROM activity_items WHERE session_id = $1", id)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := s.js.Stream(ctx, bus.StreamSidecarEvents)
	require.NoError(t, err)
	replay, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{bus.SidecarEventSubject(id.String(), "*")}, DeliverPolicy: jetstream.DeliverAllPolicy})
	require.NoError(t, err)
	rebuild := acl.New(s.pool, s.client)
	for range before {
		m, err := replay.Next(jetstream.FetchMaxWait(10 * time.Second))
		require.NoError(t, err)
		err = rebuild.Handle(ctx, m)
		if strings.HasSuffix(m.Subject(), ".no_such_event") {
			// Dead-lettered by the runner, after the item was recorded.
			assert.True(t, bus.IsPermanent(err), "an unknown event is a permanent failure: %v", err)
			continue
		}
		require.NoError(t, err)
	}

	assert.Equal(t, before, s.activityRows(t, id), "the rebuilt activity stream is the same, row for row")
	assert.Equal(t, version, s.session(t, id).Version(), "replayed commands change nothing")
	assert.Equal(t, domain.StatusIdle, s.session(t, id).Status())
}
