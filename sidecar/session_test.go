package sidecar_test

import (
	"context"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/localserver"
	"github.com/agentbus/agentbus/sidecar"
	"github.com/agentbus/agentbus/sidecar/protocol"
	"github.com/agentbus/agentbus/sidecar/protocol/protocoltest"
)

// strictDecode checks that an event's data has exactly its documented shape.
func strictDecode(t *testing.T, e protocol.Entry) {
	t.Helper()
	v, ok := protocol.NewData(e.Type)
	if !ok || !protocol.IsEventType(e.Type) {
		t.Errorf("event of unknown type %q", e.Type)
		return
	}
	require.NoError(t, protocoltest.Strictly(e.Data, v), "%s data %s", e.Type, e.Data)
}

func TestDefaultScenarioWritesTextToolsSubagentUsageAndSucceeds(t *testing.T) {
	t.Parallel()
	h := start(t, scriptConfig(t, "default"))
	end := h.waitEnd()

	assert.Equal(t, protocol.SessionEnd{Status: protocol.StatusSuccess, Reason: protocol.ReasonCompleted,
		NumTurns: 2, TotalCostUSD: end.TotalCostUSD, DurationMS: end.DurationMS}, end)
	events := h.poll()
	for _, e := range events {
		strictDecode(t, e)
		assert.NotZero(t, e.TS, "%s has ts", e.Type)
	}

	started := decode[protocol.SessionStarted](t, events[0])
	assert.Equal(t, protocol.EventSessionStarted, events[0].Type)
	assert.Equal(t, "script", started.Engine)
	assert.NotEmpty(t, started.EngineSessionID)
	assert.Equal(t, "claude-sonnet-4-5", started.Model)
	assert.False(t, started.Restarted)

	// Every tool call has exactly one result, after it.
	calls := map[string]protocol.AssistantMessage{}
	var texts, subagentCalls int
	tools := map[string]bool{}
	for _, e := range h.ofType(protocol.EventAssistantMessage) {
		m := decode[protocol.AssistantMessage](t, e)
		switch m.BlockType {
		case protocol.BlockText:
			texts++
			assert.NotEmpty(t, m.Text)
		case protocol.BlockToolUse:
			calls[m.ToolUseID] = m
			tools[m.ToolName] = true
			assert.True(t, json.Valid(m.Input))
			if m.SubagentID != "" {
				subagentCalls++
				assert.NotEmpty(t, m.ParentToolUseID)
			}
		default:
			t.Errorf("block type %q", m.BlockType)
		}
	}
	assert.GreaterOrEqual(t, texts, 3)
	for _, tool := range []string{"TodoWrite", "Read", "Bash", "Task", "Glob", "agentbus_api"} {
		assert.True(t, tools[tool], "a %s call", tool)
	}
	assert.Equal(t, 1, subagentCalls, "the subagent's Glob call")
	results := h.ofType(protocol.EventToolResult)
	require.Len(t, results, len(calls))
	for _, e := range results {
		r := decode[protocol.ToolResult](t, e)
		call, ok := calls[r.ToolUseID]
		require.True(t, ok, "result of an unknown call %s", r.ToolUseID)
		assert.Equal(t, call.SubagentID, r.SubagentID)
		if call.ToolName == "agentbus_api" {
			assert.Contains(t, r.Content, "skipped", "no API URL is set")
		}
	}

	// The subagent speaks through subagent_message and has its own usage.
	subs := h.ofType(protocol.EventSubagentMessage)
	require.Len(t, subs, 2)
	sub := decode[protocol.SubagentMessage](t, subs[0])
	assert.Equal(t, "Explore", sub.SubagentType)
	assert.Equal(t, "Task", calls[sub.ParentToolUseID].ToolName)

	var usageCost float64
	var subagentUsage int
	for _, e := range h.ofType(protocol.EventUsageUpdate) {
		u := decode[protocol.UsageUpdate](t, e)
		usageCost += u.CostUSD
		assert.Positive(t, u.CostUSD)
		assert.EqualValues(t, 200_000, u.ContextWindowMaxTokens)
		if u.IsSubagent {
			subagentUsage++
			assert.Equal(t, sub.SubagentID, u.SubagentID)
			assert.Equal(t, "claude-haiku-4-5", u.Model)
		}
	}
	assert.Equal(t, 1, subagentUsage)

	turns := h.ofType(protocol.EventTurnCompleted)
	require.Len(t, turns, 2)
	first, last := decode[protocol.TurnCompleted](t, turns[0]), decode[protocol.TurnCompleted](t, turns[1])
	assert.Equal(t, 1, first.NumTurns)
	assert.False(t, first.Final)
	assert.Equal(t, 2, last.NumTurns)
	assert.True(t, last.Final, "the session ends after the last turn")
	assert.InDelta(t, usageCost, last.TotalCostUSD, 1e-5)
	assert.InDelta(t, first.CostUSD+last.CostUSD, last.TotalCostUSD, 1e-5)
	assert.InDelta(t, usageCost, end.TotalCostUSD, 1e-5)
	assert.False(t, math.IsNaN(end.TotalCostUSD))
}

func TestEverySessionStartsWithSessionStartedAndEndsWithOneSessionEnd(t *testing.T) {
	t.Parallel()
	for _, scenario := range []string{"default", "exhaust", "handoff", "fail"} {
		t.Run(scenario, func(t *testing.T) {
			t.Parallel()
			h := start(t, scriptConfig(t, scenario))
			h.waitEnd()
			events := h.poll()
			assert.Equal(t, protocol.EventSessionStarted, events[0].Type)
			assert.Len(t, h.ofType(protocol.EventSessionEnd), 1)
			for _, e := range events {
				strictDecode(t, e)
			}
		})
	}
}

func TestObjectiveTagPicksTheScenario(t *testing.T) {
	t.Parallel()
	cfg := scriptConfig(t, "")
	cfg.Objective = "Build it [scenario:fail]"
	h := start(t, cfg)
	end := h.waitEnd()
	assert.Equal(t, protocol.ReasonAgentError, end.Reason)
}

func TestUnknownScenarioEndsTheSessionWithAConfigError(t *testing.T) {
	t.Parallel()
	h := start(t, scriptConfig(t, "no-such-scenario"))
	end := h.waitEnd()
	assert.Equal(t, protocol.StatusError, end.Status)
	assert.Equal(t, protocol.ReasonConfigError, end.Reason)
	assert.Equal(t, protocol.FailureInfrastructureError, end.FailureReason)
	assert.Contains(t, end.Error, "no-such-scenario")
	assert.Len(t, h.poll(), 1, "only the session_end")
}

func TestCancelledContextSuspendsWithoutEndingTheSession(t *testing.T) {
	t.Parallel()
	h := start(t, scriptConfig(t, "long"))
	h.waitTool("Bash")
	h.cancel()
	select {
	case <-h.done:
	case <-time.After(wait):
		t.Fatalf("sidecar did not stop; events: %s", h.dump())
	}
	require.ErrorIs(t, h.err, sidecar.ErrSuspended)
	assert.Empty(t, h.ofType(protocol.EventSessionEnd, protocol.EventStopAck), "the session goes on: %s", h.dump())
	engineID, err := h.rdb.Get(context.Background(), protocol.EngineKey(h.id)).Result()
	require.NoError(t, err, "the engine's session id is kept for the next sidecar")
	started := decode[protocol.SessionStarted](t, h.ofType(protocol.EventSessionStarted)[0])
	assert.Equal(t, started.EngineSessionID, engineID)
}

func TestResumedSidecarClosesTheOpenTurnAndWaitsForAMessage(t *testing.T) {
	t.Parallel()
	cfg := scriptConfig(t, "default")
	cfg.StayIdle = true
	cfg.ResumeEngineSessionID = "script-resumed-0001"
	h := start(t, cfg)
	h.waitType(protocol.EventTurnCompleted)
	started := decode[protocol.SessionStarted](t, h.ofType(protocol.EventSessionStarted)[0])
	assert.True(t, started.Resumed)
	assert.Equal(t, "script-resumed-0001", started.EngineSessionID)
	assert.Empty(t, h.ofType(protocol.EventAssistantMessage), "the objective is not run again: %s", h.dump())

	h.send(protocol.CommandSteeringMessage, protocol.SteeringMessage{MessageID: uuid.NewString(), Content: "Go on", Priority: protocol.PriorityQueued})
	h.waitType(protocol.EventMessageDelivered)
	h.waitFor("the message's turn completed", func(e protocol.Entry) bool {
		return e.Type == protocol.EventTurnCompleted && decode[protocol.TurnCompleted](t, e).Done
	})
	assert.Empty(t, h.ofType(protocol.EventSessionEnd), "it stays idle")
}

func TestStayIdleSidecarReportsItsWorkDoneAndWaits(t *testing.T) {
	t.Parallel()
	cfg := scriptConfig(t, "default")
	cfg.StayIdle = true
	h := start(t, cfg)
	done := h.waitFor("the work is done", func(e protocol.Entry) bool {
		return e.Type == protocol.EventTurnCompleted && decode[protocol.TurnCompleted](t, e).Done
	})
	tc := decode[protocol.TurnCompleted](t, done)
	assert.False(t, tc.Final, "no session_end follows")
	h.send(protocol.CommandSteeringMessage, protocol.SteeringMessage{MessageID: uuid.NewString(), Content: "One more thing", Priority: protocol.PriorityImmediate})
	h.waitType(protocol.EventMessageDelivered)
	assert.Empty(t, h.ofType(protocol.EventSessionEnd), "it stays idle: %s", h.dump())
	h.send(protocol.CommandStop, protocol.Stop{})
	end := h.waitEnd()
	assert.Equal(t, protocol.ReasonStopped, end.Reason)
}

func TestASuspendedSidecarDoesNotWaitForAGoneRedis(t *testing.T) {
	port, err := localserver.FreePort()
	require.NoError(t, err)
	srv, err := localserver.StartRedis(context.Background(), localserver.RedisConfig{Dir: t.TempDir(), Port: port})
	require.NoError(t, err)
	defer srv.Stop()
	ropts, err := redis.ParseURL(srv.URL())
	require.NoError(t, err)
	rdb := redis.NewClient(ropts)
	defer rdb.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	id := uuid.NewString()
	go func() {
		// Writes would retry for ten minutes were the sidecar not suspended.
		_, err := sidecar.Run(ctx, sidecar.Options{SessionID: id, Config: scriptConfig(t, "long"), Redis: rdb,
			CommandBlock: 100 * time.Millisecond, WriteTimeout: 10 * time.Minute})
		done <- err
	}()
	require.Eventually(t, func() bool {
		n, err := rdb.XLen(context.Background(), protocol.EventsKey(id)).Result()
		return err == nil && n >= 3
	}, wait, 20*time.Millisecond, "the sidecar did not start its turn")
	srv.Stop() // the runtime and its Redis go away together
	cancel()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, sidecar.ErrSuspended)
	case <-time.After(wait):
		t.Fatal("the suspended sidecar kept waiting for its Redis")
	}
}

func TestConfigScenarioReportsTheComposedConfig(t *testing.T) {
	t.Parallel()
	cfg := scriptConfig(t, "config")
	cfg.SystemPrompt = "Template prompt.\n\nSkill instructions."
	cfg.AllowedTools = []string{"Read", "lookup_order"}
	cfg.MCPTools = []protocol.MCPTool{{Name: "lookup_order", ServerURI: "http://tools.example/mcp"}}
	cfg.Subagents = []protocol.Subagent{{Name: "reviewer", Instructions: "Review."}}
	h := start(t, cfg)
	h.waitEnd()
	var texts []string
	for _, e := range h.ofType(protocol.EventAssistantMessage) {
		texts = append(texts, decode[protocol.AssistantMessage](t, e).Text)
	}
	assert.Equal(t, []string{
		"System prompt: Template prompt.\n\nSkill instructions.",
		"Allowed tools: Read, lookup_order",
		"MCP tools: lookup_order@http://tools.example/mcp",
		"Subagents: reviewer",
	}, texts)
}

// TestCommandsTakenButNotAnsweredPassToTheNextSidecar suspends a sidecar
// (its runtime died) after it took a queued message during a turn, before
// the turn ended: the cursor is past the message, and the next sidecar
// still delivers it, once.
func TestCommandsTakenButNotAnsweredPassToTheNextSidecar(t *testing.T) {
	t.Parallel()
	cfg := scriptConfig(t, "long")
	cfg.StayIdle = true
	h := newHarness(t)
	h.run(cfg, noAPI)
	h.waitTool("Bash")
	messageID := uuid.NewString()
	h.send(protocol.CommandSteeringMessage, protocol.SteeringMessage{MessageID: messageID, Content: "Also check the disk", Priority: protocol.PriorityQueued})
	entries, err := h.rdb.XRange(context.Background(), protocol.CommandsKey(h.id), "-", "+").Result()
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		cursor, err := h.rdb.Get(context.Background(), protocol.CursorKey(h.id)).Result()
		return err == nil && cursor == entries[len(entries)-1].ID
	}, wait, 10*time.Millisecond, "the sidecar took the message")
	h.cancel()
	select {
	case <-h.done:
	case <-time.After(wait):
		t.Fatalf("sidecar did not stop; events: %s", h.dump())
	}
	require.ErrorIs(t, h.err, sidecar.ErrSuspended)
	require.Empty(t, h.ofType(protocol.EventMessageDelivered), "the turn was cut short before the message: %s", h.dump())

	engineID, err := h.rdb.Get(context.Background(), protocol.EngineKey(h.id)).Result()
	require.NoError(t, err)
	cfg.ResumeEngineSessionID = engineID
	h.run(cfg, noAPI)
	got := h.waitType(protocol.EventMessageDelivered)
	assert.Equal(t, messageID, decode[protocol.MessageDelivered](t, got).MessageID)
	h.waitFor("the message's turn completed", func(e protocol.Entry) bool {
		return e.Type == protocol.EventTurnCompleted && decode[protocol.TurnCompleted](t, e).Done
	})
	assert.Len(t, h.ofType(protocol.EventMessageDelivered), 1, "delivered once: %s", h.dump())

	// A third sidecar has nothing left to take up.
	h.cancel()
	<-h.done
	before := len(h.poll())
	h.run(cfg, noAPI)
	h.waitFor("the third session_started", func(e protocol.Entry) bool {
		return e.Type == protocol.EventSessionStarted && h.index(e) >= before
	})
	h.send(protocol.CommandStop, protocol.Stop{})
	h.waitEnd()
	assert.Len(t, h.ofType(protocol.EventMessageDelivered), 1, "still delivered once: %s", h.dump())
}
