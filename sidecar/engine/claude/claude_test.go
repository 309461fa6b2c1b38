package claude_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/sidecar/protocol"
)

// These tests drive the real Claude Code CLI; only the model behind it is
// the scripted fakeModel.

// toolResultIs matches a request that carries the result of call id,
// holding want, an error or not.
func toolResultIs(id, want string, isError bool) func(modelRequest) error {
	return func(r modelRequest) error {
		res, ok := r.toolResult(id)
		switch {
		case !ok:
			return fmt.Errorf("no tool_result for %s", id)
		case res.IsError != isError:
			return fmt.Errorf("tool_result of %s: is_error %v, want %v (%q)", id, res.IsError, isError, res.Text)
		case !strings.Contains(res.Text, want):
			return fmt.Errorf("tool_result of %s is %q, want it to hold %q", id, res.Text, want)
		}
		return nil
	}
}

// userSaid matches a request whose last user message holds want.
func userSaid(want string) func(modelRequest) error {
	return func(r modelRequest) error {
		if !strings.Contains(r.lastUser(), want) {
			return fmt.Errorf("the last user message does not hold %q", want)
		}
		return nil
	}
}

func bash(command string) map[string]any {
	return map[string]any{"command": command, "description": "Run " + command}
}

func TestPlainTurnMapsTextToolCallsUsageAndCompletes(t *testing.T) {
	t.Parallel()
	w := newWorld(t,
		reply{blocks: []block{text("I'll greet from the shell."), toolUse("toolu_echo", "Bash", bash("echo hello-from-bash"))}},
		reply{match: toolResultIs("toolu_echo", "hello-from-bash", false), blocks: []block{text("The shell said hello.")}},
	)
	cfg := w.config("Say hello from the shell")
	cfg.Subagents = []protocol.Subagent{{Name: "reviewer", Description: "Reviews changes", Instructions: "Review briefly."}}
	h := w.start(cfg)
	end := h.waitEnd()

	assert.Equal(t, protocol.StatusSuccess, end.Status)
	assert.Equal(t, protocol.ReasonCompleted, end.Reason)
	assert.Equal(t, 1, end.NumTurns)

	started := h.started()
	assert.Equal(t, "claude", started.Engine)
	assert.Regexp(t, `^[0-9a-f-]{36}$`, started.EngineSessionID)
	assert.Equal(t, "claude-sonnet-4-5", started.Model)
	assert.False(t, started.Resumed)

	var texts []string
	for _, e := range h.ofType(protocol.EventAssistantMessage) {
		m := decode[protocol.AssistantMessage](t, e)
		assert.Equal(t, "claude-sonnet-4-5", m.Model)
		assert.NotEmpty(t, m.MessageID)
		if m.BlockType == protocol.BlockText {
			texts = append(texts, m.Text)
		}
	}
	assert.Equal(t, []string{"I'll greet from the shell.", "The shell said hello."}, texts)
	call := h.waitTool("toolu_echo")
	assert.Equal(t, "Bash", call.ToolName)
	assert.JSONEq(t, `{"command": "echo hello-from-bash", "description": "Run echo hello-from-bash"}`, string(call.Input))
	res := h.waitResult("toolu_echo")
	assert.False(t, res.IsError)
	assert.Contains(t, res.Content, "hello-from-bash", "the real tool ran")
	assert.Empty(t, h.ofType(protocol.EventPermissionRequest), "the policy asks about nothing")

	usages := h.ofType(protocol.EventUsageUpdate)
	require.Len(t, usages, 1, "one usage_update per turn")
	u := decode[protocol.UsageUpdate](t, usages[0])
	assert.Equal(t, "claude-sonnet-4-5", u.Model)
	assert.Positive(t, u.InputTokens)
	assert.Positive(t, u.OutputTokens)
	assert.InDelta(t, listPrice(u), u.CostUSD, 2e-4)
	assert.Positive(t, u.ContextWindowUsedTokens)
	assert.EqualValues(t, 200_000, u.ContextWindowMaxTokens)

	turns := h.ofType(protocol.EventTurnCompleted)
	require.Len(t, turns, 1)
	done := decode[protocol.TurnCompleted](t, turns[0])
	assert.True(t, done.Final)
	assert.InDelta(t, u.CostUSD, done.CostUSD, 1e-6)
	assert.InDelta(t, u.CostUSD, end.TotalCostUSD, 1e-6)

	reqs := w.model.mainRequests()
	require.Len(t, reqs, 2)
	assert.Equal(t, "claude-sonnet-4-5", reqs[0].Model)
	assert.Contains(t, string(reqs[0].System), "You are the agent of the agentbus engine tests.", "--append-system-prompt")
	assert.Contains(t, reqs[0].lastUser(), "Say hello from the shell")
	assert.Zero(t, w.model.remaining())
}

func TestImmediateSteeringInterruptsTheTurnAndStartsTheNextAtOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t,
		reply{blocks: []block{text("Waiting for the build."), toolUse("toolu_sleep", "Bash", bash("timeout 30 tail -f /dev/null; echo build finished"))}},
		reply{match: userSaid("Stop waiting; list the files instead."), blocks: []block{text("Listing the files instead.")}},
	)
	h := w.start(w.config("Wait for the build"))
	h.waitTool("toolu_sleep")
	time.Sleep(300 * time.Millisecond) // let the tool start
	sent := time.Now()
	h.send(protocol.CommandSteeringMessage, protocol.SteeringMessage{
		MessageID: "msg-steer-1", Content: "Stop waiting; list the files instead.", Priority: protocol.PriorityImmediate,
	})
	delivered := h.waitType(protocol.EventMessageDelivered)
	took := time.Since(sent)
	assert.Less(t, took, 10*time.Second, "the 30s tool call was interrupted, not waited for")
	t.Logf("steering delivered %s after it was sent", took)

	res := h.waitResult("toolu_sleep")
	assert.True(t, res.IsError, "the interrupted call ends with an error result")
	end := h.waitEnd()
	assert.Equal(t, protocol.StatusSuccess, end.Status, "an interrupted turn does not fail the session")
	assert.Equal(t, protocol.ReasonCompleted, end.Reason)

	d := decode[protocol.MessageDelivered](t, delivered)
	assert.Equal(t, protocol.MessageDelivered{MessageID: "msg-steer-1", Priority: protocol.PriorityImmediate}, d)
	turns := h.ofType(protocol.EventTurnCompleted)
	require.Len(t, turns, 1, "the interrupted turn has no turn_completed")
	assert.Equal(t, 1, decode[protocol.TurnCompleted](t, turns[0]).NumTurns)
	assert.Len(t, h.ofType(protocol.EventUsageUpdate), 2, "the interrupted turn's cost counts too")

	var texts []string
	for _, e := range h.ofType(protocol.EventAssistantMessage) {
		if m := decode[protocol.AssistantMessage](t, e); m.BlockType == protocol.BlockText {
			texts = append(texts, m.Text)
		}
	}
	assert.Equal(t, []string{"Waiting for the build.", "Listing the files instead."}, texts)
	assert.Less(t, h.events[indexOf(h, res.ToolUseID)].ID, delivered.ID, "the cut call is closed before the next input")
	assert.Zero(t, w.model.remaining())
}

// answer answers a question. The engine has the host wait for the answer
// before it writes the call, so the first answer is taken; should one still
// be refused as not_pending, it is sent again, as a client would.
func (h *harness) answer(toolUseID, answer string) {
	h.t.Helper()
	for range 100 {
		id := h.send(protocol.CommandAnswerQuestion, protocol.AnswerQuestion{ToolUseID: toolUseID, Answer: answer})
		e := h.waitFor("the outcome of answer_question "+id, func(e protocol.Entry) bool {
			return (e.Type == protocol.EventToolResult && field(h.t, e, "tool_use_id") == toolUseID) ||
				(e.Type == protocol.EventError && field(h.t, e, "command_id") == id)
		})
		if e.Type == protocol.EventToolResult {
			return
		}
		require.Equal(h.t, "not_pending", field(h.t, e, "code"), "error %s", e.Data)
		time.Sleep(20 * time.Millisecond)
	}
	h.t.Fatalf("the answer to %s was never taken", toolUseID)
}

// indexOf returns the position of the tool_result of id among the events.
func indexOf(h *harness, id string) int {
	for i, e := range h.poll() {
		if e.Type == protocol.EventToolResult && field(h.t, e, "tool_use_id") == id {
			return i
		}
	}
	return -1
}

func TestPermissionRequestsAreAllowedOrDeniedByAPerson(t *testing.T) {
	t.Parallel()
	w := newWorld(t,
		reply{blocks: []block{toolUse("toolu_allow", "Bash", bash("echo allowed > allowed.txt"))}},
		reply{match: toolResultIs("toolu_allow", "", false), blocks: []block{toolUse("toolu_deny", "Bash", bash("echo denied > denied.txt"))}},
		reply{match: toolResultIs("toolu_deny", "Not that file.", true), blocks: []block{toolUse("toolu_read", "Bash", bash("cat allowed.txt"))}},
		reply{match: toolResultIs("toolu_read", "allowed", false), blocks: []block{text("Wrote allowed.txt only.")}},
	)
	cfg := w.config("Write the files")
	cfg.PermissionPolicy = protocol.PermissionPolicy{RequireApproval: []string{"Bash"}, TimeoutMS: 60_000}
	h := w.start(cfg)

	allow := h.waitPermission("toolu_allow")
	assert.Equal(t, "Bash", allow.ToolName)
	assert.JSONEq(t, `{"command": "echo allowed > allowed.txt", "description": "Run echo allowed > allowed.txt"}`, string(allow.Input))
	assert.EqualValues(t, 60_000, allow.TimeoutMS)
	h.send(protocol.CommandPermissionResponse, protocol.PermissionResponse{RequestID: allow.RequestID, Behavior: protocol.BehaviorAllow})

	deny := h.waitPermission("toolu_deny")
	h.send(protocol.CommandPermissionResponse, protocol.PermissionResponse{RequestID: deny.RequestID, Behavior: protocol.BehaviorDeny, Message: "Not that file."})

	// A read-only command the CLI would run unasked still asks: the policy
	// wants approval for every Bash call.
	read := h.waitPermission("toolu_read")
	h.send(protocol.CommandPermissionResponse, protocol.PermissionResponse{RequestID: read.RequestID, Behavior: protocol.BehaviorAllow})

	end := h.waitEnd()
	assert.Equal(t, protocol.ReasonCompleted, end.Reason)

	assert.False(t, h.waitResult("toolu_allow").IsError)
	denied := h.waitResult("toolu_deny")
	assert.True(t, denied.IsError)
	assert.Contains(t, denied.Content, "Not that file.")
	assert.Contains(t, h.waitResult("toolu_read").Content, "allowed")

	b, err := os.ReadFile(filepath.Join(w.work, "allowed.txt"))
	require.NoError(t, err, "the allowed command ran")
	assert.Equal(t, "allowed\n", string(b))
	_, err = os.Stat(filepath.Join(w.work, "denied.txt"))
	assert.True(t, os.IsNotExist(err), "the denied command did not run")
	assert.Len(t, h.ofType(protocol.EventPermissionRequest), 3)
	assert.Zero(t, w.model.remaining())
}

func TestAskUserQuestionWaitsForTheAnswer(t *testing.T) {
	t.Parallel()
	question := map[string]any{"questions": []any{map[string]any{
		"question": "Which database should the service use?", "header": "Database", "multiSelect": false,
		"options": []any{
			map[string]any{"label": "PostgreSQL", "description": "Relational, shared"},
			map[string]any{"label": "SQLite", "description": "Embedded, local"},
		},
	}}}
	w := newWorld(t,
		reply{blocks: []block{text("I need a decision."), toolUse("toolu_ask", "AskUserQuestion", question)}},
		reply{match: toolResultIs("toolu_ask", "PostgreSQL", false), blocks: []block{text("Going with PostgreSQL.")}},
	)
	cfg := w.config("Set up the database")
	cfg.PermissionPolicy = protocol.PermissionPolicy{RequireApproval: []string{"*"}}
	h := w.start(cfg)

	call := h.waitTool("toolu_ask")
	assert.Equal(t, "AskUserQuestion", call.ToolName)
	assert.Contains(t, string(call.Input), "Which database should the service use?")
	h.answer("toolu_ask", "PostgreSQL")

	res := h.waitResult("toolu_ask")
	assert.False(t, res.IsError)
	assert.Contains(t, res.Content, "PostgreSQL")
	end := h.waitEnd()
	assert.Equal(t, protocol.ReasonCompleted, end.Reason)
	assert.Empty(t, h.ofType(protocol.EventPermissionRequest), "a question is answered, not approved")
	assert.Zero(t, w.model.remaining())
}

func TestResumedSessionGoesOnWithTheConversation(t *testing.T) {
	t.Parallel()
	w := newWorld(t,
		reply{match: userSaid("Remember the word kumquat."), blocks: []block{text("Noted: kumquat.")}},
		reply{
			match: func(r modelRequest) error {
				if !strings.Contains(r.allText(), "Remember the word kumquat.") || !strings.Contains(r.allText(), "Noted: kumquat.") {
					return fmt.Errorf("the resumed conversation lacks the first session's turn")
				}
				return userSaid("Which word was it?")(r)
			},
			blocks: []block{text("The word was kumquat.")},
		},
	)
	first := w.start(w.config("Remember the word kumquat."))
	firstEnd := first.waitEnd()
	require.Equal(t, protocol.ReasonCompleted, firstEnd.Reason)
	id := first.started().EngineSessionID

	// A resumed sidecar does not run its objective again: the question
	// comes as a message, as a follow-up after a restart would.
	cfg := w.config("Remember the word kumquat.")
	cfg.ResumeEngineSessionID = id
	cfg.StayIdle = true
	second := w.start(cfg)
	second.waitType(protocol.EventTurnCompleted)
	second.send(protocol.CommandSteeringMessage, protocol.SteeringMessage{
		MessageID: "a1b2c3d4-0000-4000-8000-000000000001", Content: "Which word was it?", Priority: protocol.PriorityQueued})
	second.waitFor("the answer's turn", func(e protocol.Entry) bool {
		return e.Type == protocol.EventTurnCompleted && decode[protocol.TurnCompleted](t, e).Done
	})
	second.send(protocol.CommandStop, protocol.Stop{})
	end := second.waitEnd()
	assert.Equal(t, protocol.ReasonStopped, end.Reason)

	started := second.started()
	assert.True(t, started.Resumed)
	assert.Equal(t, id, started.EngineSessionID, "the resumed session keeps its id")
	msgs := second.ofType(protocol.EventAssistantMessage)
	require.Len(t, msgs, 1)
	assert.Equal(t, "The word was kumquat.", decode[protocol.AssistantMessage](t, msgs[0]).Text)

	// The CLI's total cost goes on from the first session's; the second
	// session reports only its own turn.
	usages := second.ofType(protocol.EventUsageUpdate)
	require.Len(t, usages, 1)
	u := decode[protocol.UsageUpdate](t, usages[0])
	assert.InDelta(t, listPrice(u), u.CostUSD, 2e-4)
	assert.InDelta(t, u.CostUSD, end.TotalCostUSD, 1e-6)
	assert.Zero(t, w.model.remaining())
}

func TestQueuedMessageIsSentAfterTheTurnsResult(t *testing.T) {
	t.Parallel()
	w := newWorld(t,
		reply{blocks: []block{toolUse("toolu_build", "Bash", bash("timeout 2 tail -f /dev/null; echo built"))}},
		reply{match: toolResultIs("toolu_build", "built", false), blocks: []block{text("The build is done.")}},
		reply{match: userSaid("Then run the tests."), blocks: []block{text("Running the tests next.")}},
	)
	h := w.start(w.config("Build the service"))
	h.waitTool("toolu_build")
	h.send(protocol.CommandSteeringMessage, protocol.SteeringMessage{
		MessageID: "msg-queued-1", Content: "Then run the tests.", Priority: protocol.PriorityQueued,
	})
	end := h.waitEnd()
	assert.Equal(t, protocol.ReasonCompleted, end.Reason)
	assert.Equal(t, 2, end.NumTurns, "the build turn ran to its end, then the queued message's turn")

	res := h.waitResult("toolu_build")
	assert.False(t, res.IsError, "the queued message did not cut the turn short")
	turns := h.ofType(protocol.EventTurnCompleted)
	require.Len(t, turns, 2)
	delivered := h.waitType(protocol.EventMessageDelivered)
	assert.Less(t, turns[0].ID, delivered.ID, "the message is delivered after the first turn's end")
	assert.Less(t, delivered.ID, turns[1].ID)
	assert.Zero(t, w.model.remaining())
}

func TestInterruptCommandEndsTheTurnAndStopEndsTheSession(t *testing.T) {
	t.Parallel()
	w := newWorld(t,
		reply{blocks: []block{toolUse("toolu_long", "Bash", bash("timeout 30 tail -f /dev/null; echo done"))}},
	)
	h := w.start(w.config("Run the long job"))
	h.waitTool("toolu_long")
	time.Sleep(300 * time.Millisecond) // let the tool start
	sent := time.Now()
	interrupt := h.send(protocol.CommandInterrupt, protocol.Interrupt{})
	h.waitFor("interrupt_ack", func(e protocol.Entry) bool {
		return e.Type == protocol.EventInterruptAck && field(t, e, "command_id") == interrupt
	})
	assert.Less(t, time.Since(sent), 10*time.Second)
	assert.True(t, h.waitResult("toolu_long").IsError)
	assert.Empty(t, h.ofType(protocol.EventTurnCompleted), "an interrupted turn is not completed")

	time.Sleep(300 * time.Millisecond)
	assert.Empty(t, h.ofType(protocol.EventSessionEnd), "after an interrupt the session waits for a message")
	stop := h.send(protocol.CommandStop, protocol.Stop{})
	end := h.waitEnd()
	assert.Equal(t, protocol.StatusSuccess, end.Status)
	assert.Equal(t, protocol.ReasonStopped, end.Reason)
	acks := h.ofType(protocol.EventStopAck)
	require.Len(t, acks, 1)
	assert.Equal(t, protocol.StopAck{CommandID: stop}, decode[protocol.StopAck](t, acks[0]), "stopped in time, not forced")
}

func TestUnansweredPermissionRequestIsDeniedWhenItsTimeoutPasses(t *testing.T) {
	t.Parallel()
	w := newWorld(t,
		reply{blocks: []block{toolUse("toolu_write", "Bash", bash("echo late > late.txt"))}},
		reply{match: toolResultIs("toolu_write", "no permission_response within", true), blocks: []block{text("Nobody approved; skipping.")}},
	)
	cfg := w.config("Write the file")
	cfg.PermissionPolicy = protocol.PermissionPolicy{RequireApproval: []string{"Bash"}, TimeoutMS: 500}
	h := w.start(cfg)
	req := h.waitPermission("toolu_write")
	assert.EqualValues(t, 500, req.TimeoutMS)
	res := h.waitResult("toolu_write")
	assert.True(t, res.IsError, "fails closed")
	end := h.waitEnd()
	assert.Equal(t, protocol.ReasonCompleted, end.Reason)
	_, err := os.Stat(filepath.Join(w.work, "late.txt"))
	assert.True(t, os.IsNotExist(err), "the command did not run")
	assert.Zero(t, w.model.remaining())
}

// refusingFirstResume returns a CLI that, the first time it is asked to
// resume a conversation, refuses as the real one now and then does right
// after its predecessor stopped: it reads up to the user message, writes
// the CLI's own error result and exits, first deleting the conversation's
// file when lose is set. Every other run is the real CLI.
func refusingFirstResume(t *testing.T, real string, lose bool) string {
	dir := t.TempDir()
	script := filepath.Join(dir, "claude")
	drop := ""
	if lose {
		drop = `find "$HOME/.claude/projects" -name '*.jsonl' -delete`
	}
	body := fmt.Sprintf(`#!/bin/sh
case " $* " in *" --resume "*)
	if [ ! -e %[1]q ]; then
		: > %[1]q
		while read -r line; do case "$line" in *'"type":"user"'*) break;; esac; done
		%[3]s
		echo '{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":0,"total_cost_usd":0,"errors":["No conversation found with session ID: the resumed one"]}'
		exit 1
	fi;;
esac
exec %[2]q "$@"
`, filepath.Join(dir, "refused"), real, drop)
	require.NoError(t, os.WriteFile(script, []byte(body), 0o755))
	return script
}

func TestAResumeTheCLIRefusesIsTriedAgainWithTheSameConversation(t *testing.T) {
	t.Parallel()
	for name, lose := range map[string]bool{"its file there": false, "its file lost": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t,
				reply{match: userSaid("Remember the word quince."), blocks: []block{text("Noted: quince.")}},
				reply{match: all(userSaid("Which word was it?"), conversationHolds("Remember the word quince.", "Noted: quince.")),
					blocks: []block{text("The word was quince.")}},
			)
			store := filepath.Join(t.TempDir(), "checkpoints.git")
			cfg := w.config("Remember the word quince.")
			cfg.CheckpointStore = store
			first := w.start(cfg)
			require.Equal(t, protocol.ReasonCompleted, first.waitEnd().Reason)

			w.engine.Binary = refusingFirstResume(t, w.engine.Binary, lose)
			cfg.ResumeEngineSessionID = first.started().EngineSessionID
			cfg.StayIdle = true
			second := w.start(cfg)
			second.waitType(protocol.EventTurnCompleted)
			second.send(protocol.CommandSteeringMessage, protocol.SteeringMessage{
				MessageID: "a1b2c3d4-0000-4000-8000-000000000002", Content: "Which word was it?", Priority: protocol.PriorityQueued})
			second.waitFor("the answer's turn", func(e protocol.Entry) bool {
				return e.Type == protocol.EventTurnCompleted && decode[protocol.TurnCompleted](t, e).Done
			})
			second.send(protocol.CommandStop, protocol.Stop{})
			assert.Equal(t, protocol.ReasonStopped, second.waitEnd().Reason, "the refusal did not fail the session")
			msgs := second.ofType(protocol.EventAssistantMessage)
			require.Len(t, msgs, 1)
			assert.Equal(t, "The word was quince.", decode[protocol.AssistantMessage](t, msgs[0]).Text)
			assert.Zero(t, w.model.remaining())
		})
	}
}
