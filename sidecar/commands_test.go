package sidecar_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/sidecar/protocol"
)

func steer(id, content, priority string) protocol.SteeringMessage {
	return protocol.SteeringMessage{MessageID: id, Content: content, Priority: priority}
}

// delivered returns the message ids of message_delivered events, in order.
func delivered(t *testing.T, h *harness) []string {
	var ids []string
	for _, e := range h.ofType(protocol.EventMessageDelivered) {
		ids = append(ids, decode[protocol.MessageDelivered](t, e).MessageID)
	}
	return ids
}

// replies returns the texts of the agent's answers to steering messages.
func replies(t *testing.T, h *harness) []string {
	var out []string
	for _, e := range h.ofType(protocol.EventAssistantMessage) {
		m := decode[protocol.AssistantMessage](t, e)
		if m.BlockType == protocol.BlockText && len(m.Text) > 12 && m.Text[:12] == "Understood: " {
			out = append(out, m.Text[12:])
		}
	}
	return out
}

func TestQueuedSteeringMessagesAreInjectedInOrderAfterTheTurn(t *testing.T) {
	t.Parallel()
	h := start(t, scriptConfig(t, "question"))
	// The turn waits for an answer: it is certainly still running.
	ask := h.waitTool("AskUserQuestion")
	h.send(protocol.CommandSteeringMessage, steer("q1", "first", protocol.PriorityQueued))
	h.send(protocol.CommandSteeringMessage, steer("q2", "second", protocol.PriorityQueued))
	h.send(protocol.CommandSteeringMessage, steer("q3", "third", protocol.PriorityQueued))
	// A command sent after the three is handled after them (one reader, in
	// order), so once it is acked, all three are buffered.
	h.waitAck(protocol.EventPauseAck, h.send(protocol.CommandPause, nil))
	h.waitAck(protocol.EventResumeAck, h.send(protocol.CommandResume, nil))
	assert.Empty(t, delivered(t, h), "Queued messages wait for the turn's end")

	h.send(protocol.CommandAnswerQuestion, protocol.AnswerQuestion{ToolUseID: ask.ToolUseID, Answer: "SQLite"})
	end := h.waitEnd()
	assert.Equal(t, protocol.ReasonCompleted, end.Reason)

	assert.Equal(t, []string{"q1", "q2", "q3"}, delivered(t, h))
	assert.Equal(t, []string{"first", "second", "third"}, replies(t, h))
	firstTurnEnd := h.ofType(protocol.EventTurnCompleted)[0]
	for _, e := range h.ofType(protocol.EventMessageDelivered) {
		assert.Greater(t, h.index(e), h.index(firstTurnEnd), "delivered after the turn ended")
		assert.Equal(t, protocol.PriorityQueued, decode[protocol.MessageDelivered](t, e).Priority)
	}
	// Each message is its own turn, then the agent's own second turn.
	assert.Len(t, h.ofType(protocol.EventTurnCompleted), 5)
}

func TestImmediateSteeringInterruptsTheTurnAndOvertakesQueuedMessages(t *testing.T) {
	t.Parallel()
	h := start(t, scriptConfig(t, "question"))
	ask := h.waitTool("AskUserQuestion")
	h.send(protocol.CommandSteeringMessage, steer("q1", "queued one", protocol.PriorityQueued))
	h.send(protocol.CommandSteeringMessage, steer("q2", "queued two", protocol.PriorityQueued))
	h.send(protocol.CommandSteeringMessage, steer("now", "use postgres and stop asking", "immediate"))

	// The question is abandoned: the turn was cut short.
	res := h.waitResult(ask.ToolUseID)
	assert.True(t, res.IsError)
	first := h.waitType(protocol.EventMessageDelivered)
	assert.Equal(t, protocol.MessageDelivered{MessageID: "now", Priority: protocol.PriorityImmediate},
		decode[protocol.MessageDelivered](t, first))
	assert.Greater(t, h.index(first), h.index(h.waitFor("the question's result", func(e protocol.Entry) bool {
		return e.Type == protocol.EventToolResult && dataField(t, e, "tool_use_id") == ask.ToolUseID
	})))

	h.waitEnd()
	assert.Equal(t, []string{"now", "q1", "q2"}, delivered(t, h))
	assert.Equal(t, []string{"use postgres and stop asking", "queued one", "queued two"}, replies(t, h))
}

func TestDuplicateSteeringMessageIsInjectedOnce(t *testing.T) {
	t.Parallel()
	cfg := scriptConfig(t, "question")
	h := start(t, cfg)
	ask := h.waitTool("AskUserQuestion")
	h.send(protocol.CommandSteeringMessage, steer("m1", "once", protocol.PriorityQueued))
	h.send(protocol.CommandSteeringMessage, steer("m1", "once", protocol.PriorityQueued))
	h.send(protocol.CommandAnswerQuestion, protocol.AnswerQuestion{ToolUseID: ask.ToolUseID, Answer: "SQLite"})
	h.waitEnd()
	assert.Equal(t, []string{"m1"}, delivered(t, h))
}

func TestAnswerWithoutToolUseIDAnswersThePendingQuestion(t *testing.T) {
	t.Parallel()
	h := start(t, scriptConfig(t, "question"))
	ask := h.waitTool("AskUserQuestion")
	h.send(protocol.CommandAnswerQuestion, protocol.AnswerQuestion{Answer: "SQLite"})
	res := h.waitResult(ask.ToolUseID)
	assert.False(t, res.IsError)
	assert.Contains(t, res.Content, "SQLite")
	h.waitEnd()
}

func TestInterruptCutsTheTurnShortAndWaitsForAMessage(t *testing.T) {
	t.Parallel()
	h := start(t, scriptConfig(t, "long"))
	long := h.waitTool("Bash")
	cmd := h.send(protocol.CommandInterrupt, nil)

	ack := h.waitAck(protocol.EventInterruptAck, cmd)
	res := h.waitResult(long.ToolUseID)
	assert.True(t, res.IsError)
	assert.Contains(t, res.Content, "interrupted")
	assert.Less(t, h.index(h.waitFor("the long call's result", func(e protocol.Entry) bool {
		return e.Type == protocol.EventToolResult
	})), h.index(ack), "acked once the turn stopped")
	assert.Empty(t, h.ofType(protocol.EventTurnCompleted), "an interrupted turn has no turn_completed")

	// Interrupted: the agent does not go on by itself. A pause/resume round
	// trip shows the loop is idle and still listening.
	h.waitAck(protocol.EventPauseAck, h.send(protocol.CommandPause, nil))
	h.waitAck(protocol.EventResumeAck, h.send(protocol.CommandResume, nil))
	assert.Empty(t, h.ofType(protocol.EventSessionEnd))

	// A message wakes it; it answers, then finishes its own work.
	h.send(protocol.CommandSteeringMessage, steer("go", "carry on", protocol.PriorityQueued))
	end := h.waitEnd()
	assert.Equal(t, protocol.ReasonCompleted, end.Reason)
	assert.Equal(t, []string{"go"}, delivered(t, h))
	assert.Equal(t, []string{"carry on"}, replies(t, h))
}

func TestInterruptWhileIdleIsAckedAtOnce(t *testing.T) {
	t.Parallel()
	cfg := scriptConfig(t, "default")
	cfg.StayIdle = true
	h := start(t, cfg)
	h.waitType(protocol.EventTurnCompleted)
	h.waitFor("the last turn", func(e protocol.Entry) bool {
		return e.Type == protocol.EventTurnCompleted && decode[protocol.TurnCompleted](t, e).NumTurns == 2
	})
	h.waitAck(protocol.EventInterruptAck, h.send(protocol.CommandInterrupt, nil))
	h.waitAck(protocol.EventStopAck, h.send(protocol.CommandStop, nil))
	assert.Equal(t, protocol.ReasonStopped, h.waitEnd().Reason)
}

func TestPauseHoldsTheAgentAtASafePointUntilResume(t *testing.T) {
	t.Parallel()
	cfg := scriptConfig(t, "default")
	cfg.Script.PaceMS = pace(20)
	h := newHarness(t)
	// Sent before the sidecar starts: commands are read from the start.
	pauseID := h.send(protocol.CommandPause, protocol.Pause{Reason: "budget"})
	h.run(cfg, noAPI)

	pauseAck := h.waitAck(protocol.EventPauseAck, pauseID)
	// Nothing happens while paused.
	time.Sleep(300 * time.Millisecond)
	resumeID := h.send(protocol.CommandResume, nil)
	resumeAck := h.waitAck(protocol.EventResumeAck, resumeID)
	events := h.poll()
	for _, e := range events[h.index(pauseAck)+1 : h.index(resumeAck)] {
		t.Errorf("%s written while paused", e.Type)
	}
	end := h.waitEnd()
	assert.Equal(t, protocol.ReasonCompleted, end.Reason)
	assert.Equal(t, 2, end.NumTurns, "the agent kept its state and finished its work")
}

func TestPauseWhileWaitingForAnAnswerIsAckedAtOnceAndHoldsAfterIt(t *testing.T) {
	t.Parallel()
	h := start(t, scriptConfig(t, "question"))
	ask := h.waitTool("AskUserQuestion")
	pauseAck := h.waitAck(protocol.EventPauseAck, h.send(protocol.CommandPause, nil))
	h.send(protocol.CommandAnswerQuestion, protocol.AnswerQuestion{ToolUseID: ask.ToolUseID, Answer: "SQLite"})
	h.waitResult(ask.ToolUseID)
	time.Sleep(200 * time.Millisecond)
	resumeAck := h.waitAck(protocol.EventResumeAck, h.send(protocol.CommandResume, nil))
	for _, e := range h.poll()[h.index(pauseAck)+1 : h.index(resumeAck)] {
		assert.Equal(t, protocol.EventToolResult, e.Type, "only the answer is recorded while paused")
	}
	assert.Equal(t, protocol.ReasonCompleted, h.waitEnd().Reason)
}

func TestStopDuringALongToolCallEndsWithinTheTimeout(t *testing.T) {
	t.Parallel()
	cfg := scriptConfig(t, "long")
	require.EqualValues(t, 0, cfg.StopTimeoutMS, "the default stop timeout applies")
	h := start(t, cfg)
	long := h.waitTool("Bash")
	sent := time.Now()
	cmd := h.send(protocol.CommandStop, nil)
	end := h.waitEnd()
	assert.Less(t, time.Since(sent), protocol.DefaultStopTimeout, "stopped within the stop timeout")

	assert.Equal(t, protocol.SessionEnd{Status: protocol.StatusSuccess, Reason: protocol.ReasonStopped,
		TotalCostUSD: end.TotalCostUSD, DurationMS: end.DurationMS}, end)
	ack := decode[protocol.StopAck](t, h.waitAck(protocol.EventStopAck, cmd))
	assert.False(t, ack.Forced)
	assert.True(t, h.waitResult(long.ToolUseID).IsError, "the call was cut short")
	events := h.poll()
	assert.Equal(t, protocol.EventStopAck, events[len(events)-2].Type, "stop_ack, then session_end")
}

func TestStopIsForcedWhenTheAgentDoesNotStopInTime(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "stuck.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"name":"stuck","turns":[{"steps":[
		{"kind":"tool","tool":"Bash","input":{"command":"sleep 2"},"duration_ms":2000,"ignore_cancel":true,"result":"done"},
		{"kind":"text","text":"never written"}]}]}`), 0o600))
	cfg := scriptConfig(t, "")
	cfg.Script.ScenarioFile = file
	h := start(t, cfg)
	stuck := h.waitTool("Bash")
	sent := time.Now()
	cmd := h.send(protocol.CommandStop, protocol.Stop{TimeoutMS: 300})
	end := h.waitEnd()
	assert.Equal(t, protocol.ReasonStopped, end.Reason)
	assert.True(t, decode[protocol.StopAck](t, h.waitAck(protocol.EventStopAck, cmd)).Forced,
		"the agent ignored the stop: the session ended when the timeout passed")

	// The abandoned agent finishes its call later; nothing of it is written
	// after session_end.
	time.Sleep(2500*time.Millisecond - time.Since(sent))
	events := h.poll()
	assert.Equal(t, protocol.EventSessionEnd, events[len(events)-1].Type)
	for _, e := range h.ofType(protocol.EventToolResult) {
		assert.NotEqual(t, stuck.ToolUseID, dataField(t, e, "tool_use_id"))
	}
}

func TestStopWithForceDoesNotWait(t *testing.T) {
	t.Parallel()
	cfg := scriptConfig(t, "question")
	h := start(t, cfg)
	h.waitTool("AskUserQuestion")
	cmd := h.send(protocol.CommandStop, protocol.Stop{Force: true})
	assert.Equal(t, protocol.ReasonStopped, h.waitEnd().Reason)
	h.waitAck(protocol.EventStopAck, cmd)
}

func TestReloadConfigIsAppliedBetweenTurnsAndAcked(t *testing.T) {
	t.Parallel()
	cfg := scriptConfig(t, "default")
	cfg.StayIdle = true
	h := start(t, cfg)
	h.waitFor("the last turn", func(e protocol.Entry) bool {
		return e.Type == protocol.EventTurnCompleted && decode[protocol.TurnCompleted](t, e).NumTurns == 2
	})
	assert.Empty(t, h.ofType(protocol.EventSessionEnd), "stay_idle keeps the session open")

	next := cfg
	next.Model = "claude-opus-4-6"
	next.SystemPrompt = "You are careful."
	cmd := h.send(protocol.CommandReloadConfig, protocol.ReloadConfig{Config: &next})
	ack := decode[protocol.ReloadConfigAck](t, h.waitAck(protocol.EventReloadConfigAck, cmd))
	started := decode[protocol.SessionStarted](t, h.waitType(protocol.EventSessionStarted))
	assert.Equal(t, protocol.ReloadConfigAck{CommandID: cmd, Model: "claude-opus-4-6", EngineSessionID: started.EngineSessionID}, ack)

	// The next turn runs on the new model.
	h.send(protocol.CommandSteeringMessage, steer("m", "and now?", protocol.PriorityQueued))
	at := h.index(h.waitType(protocol.EventMessageDelivered))
	reply := h.waitFor("the reply's usage", func(e protocol.Entry) bool {
		return e.Type == protocol.EventUsageUpdate && h.index(e) > at
	})
	assert.Equal(t, "claude-opus-4-6", decode[protocol.UsageUpdate](t, reply).Model)

	// A config for another engine or session is refused; the session goes on.
	bad := cfg
	bad.Engine = protocol.EngineClaude
	badID := h.send(protocol.CommandReloadConfig, protocol.ReloadConfig{Config: &bad})
	errEv := decode[protocol.ErrorEvent](t, h.waitFor("the reload error", func(e protocol.Entry) bool {
		return e.Type == protocol.EventError && dataField(t, e, "command_id") == badID
	}))
	assert.Equal(t, protocol.CodeBadData, errEv.Code)
	h.waitAck(protocol.EventStopAck, h.send(protocol.CommandStop, nil))
	h.waitEnd()
}

// A pause that finds no turn running crossed the end of the last turn: the
// session was Running when it asked, so it refused that turn's end as
// Pausing. The sidecar writes the turn's end again once resumed.
func TestAPauseBetweenTurnsEndsTheLastTurnAgainOnceResumed(t *testing.T) {
	t.Parallel()
	cfg := scriptConfig(t, "default")
	cfg.StayIdle = true
	h := start(t, cfg)
	last := h.waitFor("the work's last turn", func(e protocol.Entry) bool {
		return e.Type == protocol.EventTurnCompleted && decode[protocol.TurnCompleted](t, e).Done
	})
	h.waitAck(protocol.EventPauseAck, h.send(protocol.CommandPause, nil))
	resumeAck := h.waitAck(protocol.EventResumeAck, h.send(protocol.CommandResume, nil))
	again := h.waitFor("the turn's end after the resume", func(e protocol.Entry) bool {
		return e.Type == protocol.EventTurnCompleted && h.index(e) > h.index(resumeAck)
	})
	assert.Equal(t, decode[protocol.TurnCompleted](t, last), decode[protocol.TurnCompleted](t, again))
}
