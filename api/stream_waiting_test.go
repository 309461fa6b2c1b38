package api

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/feed"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres/queries"
)

// The stream tells what a session waits for from the tool items it
// carries, even when the activity has not recorded the call yet: the
// activity is written by another worker, and nothing would tell the
// client again until the call ended.
func TestTheStreamFollowsTheRunningToolCallFromItsOwnItems(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	snap := domain.AgentSessionSnapshot{ID: id, Status: domain.StatusRunning}
	reads := 0
	w := &waitingFeed{
		session:  id,
		snapshot: func(context.Context) (domain.AgentSessionSnapshot, error) { return snap, nil },
		recorded: func(context.Context) (*queries.RunningTool, error) { reads++; return nil, nil },
	}
	item := func(kind string, data any) bus.Envelope {
		env, err := bus.NewEnvelope(kind, feed.Aggregate, id.String(), 0, "alice", data)
		require.NoError(t, err)
		return env
	}
	tell := func() *WaitingFor {
		msg, err := w.next(context.Background())
		require.NoError(t, err)
		require.NotNil(t, msg, "what the session waits for changed")
		return msg.WaitingFor
	}

	assert.Equal(t, WaitingForModel, tell().Kind, "no call recorded or seen")
	started := time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)
	call := item(feed.KindToolCall, feed.LiveToolCall{SessionID: id.String(), ToolUseID: "toolu_1", ToolName: "Bash",
		Input: map[string]any{"command": "make integration-test"}, OccurredAt: started})
	require.True(t, w.changes(call))
	w.observe(call)
	got := tell()
	assert.Equal(t, WaitingForToolCall, got.Kind)
	assert.Equal(t, "Bash: make integration-test", got.Detail)
	require.NotNil(t, got.Since)
	assert.True(t, started.Equal(*got.Since))

	// A subagent's call does not hold the session up.
	w.observe(item(feed.KindToolCall, feed.LiveToolCall{SessionID: id.String(), ToolUseID: "toolu_2", ToolName: "Read",
		SubAgentID: "sub", Input: map[string]any{}, OccurredAt: started}))
	snap.Status = domain.StatusPausing
	got = tell()
	assert.Equal(t, "Bash: make integration-test (the session pauses once it ends)", got.Detail)

	w.observe(item(feed.KindToolResult, feed.LiveToolResult{SessionID: id.String(), ToolUseID: "toolu_1", Content: "ok"}))
	got = tell()
	assert.Equal(t, WaitingForSafePoint, got.Kind, "the call ended")
	assert.Equal(t, 1, reads, "the activity is read only until the stream shows a tool item")
}

// A call the activity recorded before the stream opened ends with the
// result the stream carries.
func TestTheStreamEndsARecordedCallWithItsResult(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	w := &waitingFeed{
		session: id,
		snapshot: func(context.Context) (domain.AgentSessionSnapshot, error) {
			return domain.AgentSessionSnapshot{ID: id, Status: domain.StatusRunning}, nil
		},
		recorded: func(context.Context) (*queries.RunningTool, error) {
			return &queries.RunningTool{ToolUseID: "toolu_1", ToolName: "Bash", Input: `{"command":"sleep 60"}`}, nil
		},
	}
	msg, err := w.next(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "Bash: sleep 60", msg.WaitingFor.Detail)

	env, err := bus.NewEnvelope(feed.KindToolResult, feed.Aggregate, id.String(), 0, "alice",
		feed.LiveToolResult{SessionID: id.String(), ToolUseID: "toolu_1"})
	require.NoError(t, err)
	w.observe(env)
	msg, err = w.next(context.Background())
	require.NoError(t, err)
	assert.Equal(t, WaitingForModel, msg.WaitingFor.Kind)
}
