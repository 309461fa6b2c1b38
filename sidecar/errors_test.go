package sidecar_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/sidecar/protocol"
)

func TestUnknownCommandsAndBadDataGetErrorEventsAndTheLoopGoesOn(t *testing.T) {
	t.Parallel()
	cfg := scriptConfig(t, "question")
	h := start(t, cfg)
	ask := h.waitTool("AskUserQuestion")
	now := func() string { return time.Now().Format("20060102150405") }

	cases := []struct {
		name   string
		fields []any
		code   string
	}{
		{"unknown type", []any{"type", "dance", "data", "{}", "ts", now(), "command_id", "c-unknown"}, protocol.CodeUnknownCommand},
		{"missing type", []any{"data", "{}", "ts", now(), "command_id", "c-notype"}, protocol.CodeBadData},
		{"data not JSON", []any{"type", "steering_message", "data", "{not json", "ts", now(), "command_id", "c-json"}, protocol.CodeBadData},
		{"data not an object", []any{"type", "pause", "data", "[1]", "ts", now(), "command_id", "c-array"}, protocol.CodeBadData},
		{"missing content", []any{"type", "steering_message", "data", `{"message_id":"m","priority":"Queued"}`, "ts", now(), "command_id", "c-content"}, protocol.CodeBadData},
		{"bad priority", []any{"type", "steering_message", "data", `{"message_id":"m","content":"x","priority":"Soon"}`, "ts", now(), "command_id", "c-priority"}, protocol.CodeBadData},
		{"wrong field type", []any{"type", "stop", "data", `{"timeout_ms":"soon"}`, "ts", now(), "command_id", "c-stop"}, protocol.CodeBadData},
		{"bad behavior", []any{"type", "permission_response", "data", `{"request_id":"r","behavior":"maybe"}`, "ts", now(), "command_id", "c-behavior"}, protocol.CodeBadData},
		{"plan without approved", []any{"type", "plan_decision", "data", `{"feedback":"x"}`, "ts", now(), "command_id", "c-plan"}, protocol.CodeBadData},
		{"no plan waits", []any{"type", "plan_decision", "data", `{"approved":true}`, "ts", now(), "command_id", "c-noplan"}, protocol.CodeNotPending},
		{"reload without config", []any{"type", "reload_config", "data", `{}`, "ts", now(), "command_id", "c-reload"}, protocol.CodeBadData},
		{"answer without answer", []any{"type", "answer_question", "data", `{"tool_use_id":"` + ask.ToolUseID + `"}`, "ts", now(), "command_id", "c-answer"}, protocol.CodeBadData},
	}
	for _, c := range cases {
		h.sendRaw(c.fields...)
	}
	for _, c := range cases {
		var commandID string
		for i := 0; i+1 < len(c.fields); i += 2 {
			if c.fields[i] == "command_id" {
				commandID = c.fields[i+1].(string)
			}
		}
		e := h.waitFor("error for "+c.name, func(e protocol.Entry) bool {
			return e.Type == protocol.EventError && dataField(t, e, "command_id") == commandID
		})
		ev := decode[protocol.ErrorEvent](t, e)
		assert.Equal(t, c.code, ev.Code, c.name)
		assert.NotEmpty(t, ev.Message, c.name)
		assert.NotEmpty(t, ev.EntryID, c.name)
	}
	unknown := decode[protocol.ErrorEvent](t, h.waitFor("unknown", func(e protocol.Entry) bool {
		return e.Type == protocol.EventError && dataField(t, e, "command_id") == "c-unknown"
	}))
	assert.Equal(t, "dance", unknown.CommandType)

	// The loop goes on: the question is still open and gets answered.
	h.send(protocol.CommandAnswerQuestion, protocol.AnswerQuestion{ToolUseID: ask.ToolUseID, Answer: "SQLite"})
	assert.Equal(t, protocol.ReasonCompleted, h.waitEnd().Reason)
	assert.Empty(t, h.ofType(protocol.EventMessageDelivered), "no bad steering message was injected")
}

func TestCommandIDInsideDataIsAccepted(t *testing.T) {
	t.Parallel()
	h := start(t, scriptConfig(t, "long"))
	h.waitTool("Bash")
	h.sendRaw("type", "stop", "data", `{"command_id":"inside"}`, "ts", "1")
	h.waitAck(protocol.EventStopAck, "inside")
	h.waitEnd()
}

func TestRestartedSidecarDoesNotHandleCommandsTwice(t *testing.T) {
	t.Parallel()
	cfg := scriptConfig(t, "default")
	cfg.StayIdle = true
	h := newHarness(t)
	h.run(cfg, noAPI)
	h.waitType(protocol.EventTurnCompleted)
	interruptID := h.send(protocol.CommandInterrupt, nil)
	h.waitAck(protocol.EventInterruptAck, interruptID)
	stopID := h.send(protocol.CommandStop, nil)
	h.waitAck(protocol.EventStopAck, stopID)
	h.waitEnd()
	cursor, err := h.rdb.Get(context.Background(), protocol.CursorKey(h.id)).Result()
	require.NoError(t, err)
	assert.NotEmpty(t, cursor)
	before := len(h.poll())

	// A second sidecar of the same session starts after the handled commands.
	h.run(cfg, noAPI)
	restartedAt := h.waitFor("the second session_started", func(e protocol.Entry) bool {
		return e.Type == protocol.EventSessionStarted && h.index(e) >= before
	})
	assert.True(t, decode[protocol.SessionStarted](t, restartedAt).Restarted)
	second := h.send(protocol.CommandStop, nil)
	h.waitAck(protocol.EventStopAck, second)
	h.waitEnd()
	for _, e := range h.poll()[before:] {
		if id := dataField(t, e, "command_id"); id != "" {
			assert.Equal(t, second, id, "%s of an old command", e.Type)
		}
	}
}
