package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/internal/uptest"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// TestARetryRightAfterARejectRunsAgain rejects a session's output and
// retries it at once, before the rejected run's release reached the
// runtime: the late release must not keep the rejected run's sidecar, nor
// drain the relay of the retried run (its events would go nowhere), and
// the retried run must start a sidecar of its own and deliver its output.
// Several sessions at once make the races likely.
func TestARetryRightAfterARejectRunsAgain(t *testing.T) {
	u := startUpWithRuntime(t)
	for i := range 8 {
		t.Run(fmt.Sprint("session ", i), func(t *testing.T) {
			t.Parallel()
			c := *u.Client
			c.T = t
			dir := filepath.Join(u.workspace, u.owner, uuid.NewString()[:8])
			id := u.start(map[string]any{"workingDirectory": dir, "objective": "Review me [scenario:default]"})
			first := c.WaitFor(id, "Idle awaiting review", func(s uptest.Session) bool { return s.Status == "Idle" && s.HasPendingReview })
			firstPID := c.SidecarPIDs()[id]
			c.Must(http.MethodPost, "/api/agents/sessions/"+id+"/reject", map[string]any{"reason": "not good"}, nil)
			c.Must(http.MethodPost, "/api/agents/sessions/"+id+"/retry", map[string]any{"additionalInstruction": "again, better"}, nil)
			turns := 2 * first.Metrics.TurnCount
			s := c.WaitFor(id, "Idle with the retried run's output", func(s uptest.Session) bool {
				return s.Status == "Idle" && s.HasPendingReview && s.Metrics.TurnCount >= turns
			})
			assert.Equal(t, turns, s.Metrics.TurnCount, "the retried run took as many turns as the first")
			assert.True(t, processGone(firstPID), "the rejected run's sidecar (pid %d) is gone", firstPID)
			second := c.SidecarPIDs()[id]
			assert.NotZero(t, second, "the retried run has a sidecar")
			assert.NotEqual(t, firstPID, second, "the retried run has a sidecar of its own")
			// The retried run's agent is told the retry's instruction.
			raw, err := os.ReadFile(filepath.Join(u.dataDir, "sidecars", id+".json"))
			if assert.NoError(t, err, "the running sidecar's config") {
				var cfg protocol.Config
				assert.NoError(t, json.Unmarshal(raw, &cfg))
				assert.Equal(t, 1, cfg.Attempt)
				assert.Contains(t, cfg.Objective, "again, better")
			}
			c.Must(http.MethodPost, "/api/agents/sessions/"+id+"/approve", nil, nil)
			c.WaitFor(id, "Completed", func(s uptest.Session) bool { return s.Status == "Completed" })
		})
	}
}

// TestPoisonRawEventsDoNotBlockTheSession writes, as an agent holding the
// session's Redis user could, raw events that the control plane refuses
// into a live session's stream: a message whose text holds a NUL (no
// database takes it) and a session_end that is valid JSON but refused for
// the same reason. Each is recorded and dead-lettered; the session's later
// events still flow, before and after a restart of up: its follow-ups
// reach the agent and its transcript grows.
func TestPoisonRawEventsDoNotBlockTheSession(t *testing.T) {
	u := startUpWithRuntime(t)
	dir := filepath.Join(u.workspace, u.owner, "poison")
	id := u.start(map[string]any{"workingDirectory": dir, "objective": "Say hello"})
	u.waitReview(id)
	messages := func() int {
		var page struct {
			Total int `json:"total"`
		}
		u.Must(http.MethodGet, "/api/agents/sessions/"+id+"/messages", nil, &page)
		return page.Total
	}
	before := messages()

	ctx := context.Background()
	for _, e := range []struct{ typ, data string }{
		{protocol.EventAssistantMessage, `{"message_id":"poison","block_type":"text","text":"a NUL \u0000 here"}`},
		{protocol.EventSessionEnd, `{"status":"success","reason":"completed\u0000","exit_code":0,"num_turns":1,"total_cost_usd":0}`},
	} {
		require.NoError(t, u.redis.XAdd(ctx, &redis.XAddArgs{Stream: protocol.EventsKey(id), Values: []any{
			"type", e.typ, "data", e.data, "ts", strconv.FormatInt(time.Now().UnixMilli(), 10)}}).Err())
	}

	// The refused session_end is recorded; then the session stays quiet for
	// longer than a relay's drain (2 s), as a session waiting for its
	// owner does.
	u.waitActivity(id, "Invalid sidecar event session_end")
	time.Sleep(3 * time.Second)
	u.FollowUp(id, "Now say goodbye", "Immediate")
	require.Eventually(t, func() bool { return messages() > before }, 2*wait, 100*time.Millisecond,
		"the transcript got none of the messages written after the poison")
	js := u.jetStream()
	for _, consumer := range []string{"transcript"} {
		stream, err := js.Stream(ctx, bus.StreamDLQ)
		require.NoError(t, err)
		_, err = stream.GetLastMsgForSubject(ctx, bus.DLQSubject(consumer))
		assert.NoError(t, err, "the %s worker dead-lettered the poison", consumer)
	}

	u.stop()
	u.launch()
	after := messages()
	u.FollowUp(id, "And once more", "Queued")
	require.Eventually(t, func() bool { return messages() > after }, 2*wait, 100*time.Millisecond,
		"after a restart the transcript got none of the follow-up's messages")
}

// TestASessionKeepsItsEngineAcrossRuntimes restarts up with another engine
// while a session waits Idle: the session's agent lives in the engine it
// started on, so the other runtime leaves it waiting (its follow-up
// Pending) instead of switching it, and a runtime of its own engine takes
// it up again with its conversation.
func TestASessionKeepsItsEngineAcrossRuntimes(t *testing.T) {
	u := startUpWithRuntime(t)
	id := u.start(map[string]any{"workingDirectory": "pinned", "objective": "Say hello"})
	u.waitReview(id)
	var detail struct {
		Engine string `json:"engine"`
	}
	u.Must(http.MethodGet, "/api/agents/sessions/"+id, nil, &detail)
	require.Equal(t, "script", detail.Engine, "the session records the engine it started on")
	u.stop()

	t.Setenv("AGENTBUS_ENGINE", "claude")
	u.launch()
	m := u.Enqueue(id, "What did you do before?", "Immediate")
	// Several of the runtime's looks at its sidecars (every 2 s) pass
	// without one for the session.
	for range 60 {
		assert.Zero(t, u.SidecarPIDs()[id], "a runtime of another engine started the session's sidecar")
		time.Sleep(100 * time.Millisecond)
	}
	u.Must(http.MethodGet, "/api/agents/sessions/"+id, nil, &detail)
	assert.Equal(t, "script", detail.Engine)
	u.stop()

	// The message sent meanwhile waits in the session's command stream,
	// across the restart, for the agent of its engine.
	t.Setenv("AGENTBUS_ENGINE", "")
	u.launch()
	u.WaitDelivered(id, m)
	u.waitReview(id)
	assert.NotContains(t, u.Activity(id), "Sidecar started (claude", "no claude sidecar ever ran the session")
}
