package claude_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/uptest"
)

// all matches a request that every matcher matches.
func all(matchers ...func(modelRequest) error) func(modelRequest) error {
	return func(r modelRequest) error {
		for _, m := range matchers {
			if err := m(r); err != nil {
				return err
			}
		}
		return nil
	}
}

// userDidNotSay matches a request whose last user message lacks text.
func userDidNotSay(text string) func(modelRequest) error {
	return func(r modelRequest) error {
		if strings.Contains(r.lastUser(), text) {
			return fmt.Errorf("the last user message holds %q too early", text)
		}
		return nil
	}
}

// conversationHolds matches a request whose conversation holds each text.
func conversationHolds(texts ...string) func(modelRequest) error {
	return func(r modelRequest) error {
		for _, text := range texts {
			if !strings.Contains(r.allText(), text) {
				return fmt.Errorf("the conversation lacks %q", text)
			}
		}
		return nil
	}
}

// systemHolds matches a request whose system prompt holds text.
func systemHolds(text string) func(modelRequest) error {
	return func(r modelRequest) error {
		if !strings.Contains(string(r.System), text) {
			return fmt.Errorf("the system prompt lacks %q", text)
		}
		return nil
	}
}

// flow is one flow's user on the shared deployment, with a script of its
// own on the shared model.
type flow struct {
	*uptest.Client
	model  *fakeModel
	marker string
}

func newFlow(t *testing.T, u *upProcess, w *world, script ...reply) *flow {
	t.Helper()
	f := &flow{Client: u.As(t, upSecret, uuid.NewString()), model: w.model, marker: "[flow " + uuid.NewString()[:8] + "]"}
	w.model.route(t, f.marker, script...)
	return f
}

// start starts a session whose objective holds the flow's marker.
func (f *flow) start(objective string, body map[string]any) string {
	f.T.Helper()
	return f.Start(objective+" "+f.marker, body)
}

// done checks that the model answered every reply of the flow's script.
func (f *flow) done() {
	f.T.Helper()
	assert.Zero(f.T, f.model.remainingOf(f.marker), "the model answered every scripted reply of the flow")
}

// TestEveryFlowWithTheClaudeEngine runs every flow of the README's table
// through `agentbus up` and its real runtime with the claude engine: each
// session's agent the real Claude Code CLI, in its sandbox, against a
// scripted model that gives each flow's sessions a script of their own.
func TestEveryFlowWithTheClaudeEngine(t *testing.T) {
	w := newWorld(t)
	u := startUp(t, w)
	sleep := func(id, command string) reply { return reply{blocks: []block{toolUse(id, "Bash", bash(command))}} }
	// The CLI takes a plan (ExitPlanMode) only in plan mode.
	enterPlanMode := reply{blocks: []block{toolUse("toolu_enter", "EnterPlanMode", map[string]any{})}}
	uptest.RunFlows(t, uptest.EngineClaude, map[string]func(*testing.T){
		"Follow-up on an Idle session": func(t *testing.T) {
			f := newFlow(t, u, w,
				reply{blocks: []block{text("Hello.")}},
				reply{match: userSaid("Now say goodbye."), blocks: []block{text("Goodbye.")}})
			id := f.start("Say hello.", nil)
			f.WaitReview(id)
			pid := f.SidecarPID(id)
			f.FollowUp(id, "Now say goodbye.", "Queued")
			assert.Equal(t, pid, f.SidecarPID(id), "one sidecar, one CLI served both turns")
			f.done()
		},
		"Immediate steering mid-turn": func(t *testing.T) {
			f := newFlow(t, u, w,
				sleep("toolu_wait", "timeout 60 tail -f /dev/null; echo build finished"),
				reply{match: userSaid("Stop waiting; list the files instead."), blocks: []block{text("Listing the files instead.")}})
			id := f.start("Wait for the build.", nil)
			f.WaitActivity(id, "tail -f /dev/null")
			f.WaitDelivered(id, f.Enqueue(id, "Stop waiting; list the files instead.", "Immediate"))
			f.WaitReview(id)
			f.done()
		},
		"Queued message after the turn": func(t *testing.T) {
			f := newFlow(t, u, w,
				sleep("toolu_build", "sleep 2; echo built"),
				reply{match: all(toolResultIs("toolu_build", "built", false), userDidNotSay("Then deploy.")), blocks: []block{text("Built.")}},
				reply{match: userSaid("Then deploy."), blocks: []block{text("Deployed.")}})
			id := f.start("Build it.", nil)
			f.WaitActivity(id, "sleep 2")
			f.WaitDelivered(id, f.Enqueue(id, "Then deploy.", "Queued"))
			f.WaitFor(id, "the queued message's turn done", func(s uptest.Session) bool {
				return s.Status == "Idle" && s.HasPendingReview && s.Metrics.TurnCount >= 2
			})
			f.done()
		},
		"Question and answer": func(t *testing.T) {
			question := map[string]any{"questions": []any{map[string]any{
				"question": "Which database should the service use?", "header": "Database", "multiSelect": false,
				"options": []any{
					map[string]any{"label": "PostgreSQL", "description": "Relational, shared"},
					map[string]any{"label": "SQLite", "description": "Embedded, local"},
				},
			}}}
			f := newFlow(t, u, w,
				reply{blocks: []block{text("I need a decision."), toolUse("toolu_ask", "AskUserQuestion", question)}},
				reply{match: toolResultIs("toolu_ask", "PostgreSQL", false), blocks: []block{text("Going with PostgreSQL.")}})
			id := f.start("Set up the database.", nil)
			f.WaitStatus(id, "WaitingForInput")
			f.Post(id, "answer", map[string]any{"answer": "PostgreSQL"})
			f.WaitReview(id)
			f.done()
		},
		"Plan approved": func(t *testing.T) {
			f := newFlow(t, u, w, enterPlanMode,
				reply{match: toolResultIs("toolu_enter", "", false),
					blocks: []block{toolUse("toolu_plan", "ExitPlanMode", map[string]any{"plan": "1. Validate the input\n2. Answer 400"})}},
				reply{match: toolResultIs("toolu_plan", "", false), blocks: []block{text("Carrying out the plan.")}})
			id := f.start("Validate the input.", nil)
			f.WaitStatus(id, "WaitingForApproval")
			f.Post(id, "plan/approve", nil)
			f.WaitReview(id)
			f.done()
		},
		"Plan rejected, then approved": func(t *testing.T) {
			f := newFlow(t, u, w, enterPlanMode,
				reply{match: toolResultIs("toolu_enter", "", false),
					blocks: []block{toolUse("toolu_plan1", "ExitPlanMode", map[string]any{"plan": "1. Answer 422"})}},
				reply{match: toolResultIs("toolu_plan1", "Answer 400, not 422", true),
					blocks: []block{toolUse("toolu_plan2", "ExitPlanMode", map[string]any{"plan": "1. Answer 400"})}},
				reply{match: toolResultIs("toolu_plan2", "", false), blocks: []block{text("Carrying out the revised plan.")}})
			id := f.start("Validate the input.", nil)
			f.WaitStatus(id, "WaitingForApproval")
			f.Post(id, "plan/reject", map[string]any{"feedback": "Answer 400, not 422"})
			f.WaitFor(id, "the revised plan", func(s uptest.Session) bool {
				return s.Status == "WaitingForApproval" && f.model.remainingOf(f.marker) == 1
			})
			f.Post(id, "plan/approve", nil)
			f.WaitReview(id)
			f.done()
		},
		"Tool permission allowed": func(t *testing.T) {
			f := newFlow(t, u, w,
				reply{blocks: []block{toolUse("toolu_echo", "Bash", bash("echo 'port: 8080' > config.yaml; cat config.yaml"))}},
				reply{match: toolResultIs("toolu_echo", "port: 8080", false), blocks: []block{text("Written.")}})
			id := f.start("Write the config.", map[string]any{"toolApproval": map[string]any{"mode": "All", "timeoutSeconds": 600}})
			f.Post(id, "permissions/"+f.Permission(id, "Bash")+"/allow", nil)
			f.WaitReview(id)
			f.done()
		},
		"Tool permission denied": func(t *testing.T) {
			f := newFlow(t, u, w,
				reply{blocks: []block{toolUse("toolu_rm", "Bash", bash("rm -rf build"))}},
				reply{match: toolResultIs("toolu_rm", "Keep the build directory", true), blocks: []block{text("I left it.")}})
			id := f.start("Clean the build directory.", map[string]any{"toolApproval": map[string]any{"mode": "All", "timeoutSeconds": 600}})
			f.Post(id, "permissions/"+f.Permission(id, "Bash")+"/deny", map[string]any{"message": "Keep the build directory"})
			f.WaitReview(id)
			f.done()
		},
		"Tool permission timed out": func(t *testing.T) {
			f := newFlow(t, u, w,
				reply{blocks: []block{toolUse("toolu_rm", "Bash", bash("rm -rf build"))}},
				reply{match: toolResultIs("toolu_rm", "", true), blocks: []block{text("I was not allowed to remove it.")}})
			id := f.start("Clean the build directory.", map[string]any{
				"toolApproval": map[string]any{"mode": "All", "timeoutSeconds": 2, "onTimeout": "Deny"}})
			f.WaitStatus(id, "WaitingForApproval")
			f.WaitReview(id)
			f.done()
		},
		"Pause and resume during a tool call": func(t *testing.T) {
			f := newFlow(t, u, w,
				sleep("toolu_sleep", "sleep 3; echo built"),
				reply{match: toolResultIs("toolu_sleep", "built", false), blocks: []block{text("The build finished.")}},
				reply{match: userSaid("What happened?"), blocks: []block{text("The build finished while you paused me.")}})
			id := f.start("Wait for the build.", nil)
			f.WaitActivity(id, "sleep 3")
			f.Post(id, "pause", nil)
			f.WaitStatus(id, "Paused")
			f.Post(id, "resume", nil)
			f.WaitStatus(id, "Idle")
			f.FollowUp(id, "What happened?", "Queued")
			f.done()
		},
		"Interrupt": func(t *testing.T) {
			f := newFlow(t, u, w,
				sleep("toolu_wait", "timeout 60 tail -f /dev/null"),
				reply{match: userSaid("Only run the unit tests."), blocks: []block{text("Running the unit tests only.")}})
			id := f.start("Run every test.", nil)
			f.WaitActivity(id, "tail -f /dev/null")
			f.Post(id, "interrupt", nil)
			f.WaitStatus(id, "Interrupted")
			f.WaitDelivered(id, f.Enqueue(id, "Only run the unit tests.", "Queued"))
			f.WaitReview(id)
			f.done()
		},
		"Cancel": func(t *testing.T) {
			f := newFlow(t, u, w, sleep("toolu_wait", "timeout 60 tail -f /dev/null"))
			id := f.start("Run every test.", nil)
			f.WaitActivity(id, "tail -f /dev/null")
			pid := f.SidecarPID(id)
			f.Post(id, "cancel", nil)
			f.WaitStatus(id, "Cancelled")
			f.WaitGone(pid)
			require.Eventually(t, func() bool { return len(uptest.ProcessesNaming(id)) == 0 }, f.Wait, 50*time.Millisecond,
				"a process of the cancelled session is left")
		},
		"Force cancel": func(t *testing.T) {
			f := newFlow(t, u, w, sleep("toolu_wait", "timeout 60 tail -f /dev/null"))
			id := f.start("Run every test.", nil)
			f.WaitActivity(id, "tail -f /dev/null")
			pid := f.SidecarPID(id)
			f.Post(id, "force-cancel", nil)
			f.WaitStatus(id, "Cancelled")
			f.WaitGone(pid)
			require.Eventually(t, func() bool { return len(uptest.ProcessesNaming(id)) == 0 }, f.Wait, 50*time.Millisecond,
				"a process of the cancelled session is left")
		},
		"Budget spent, raised, resumed": func(t *testing.T) {
			// 50,000 input tokens cost $0.15, three times the cap.
			f := newFlow(t, u, w,
				reply{inputTokens: 50000, blocks: []block{toolUse("toolu_one", "Bash", bash("echo one"))}},
				reply{match: toolResultIs("toolu_one", "one", false), blocks: []block{text("One done.")}},
				reply{match: userSaid("Go on."), blocks: []block{text("Going on.")}})
			id := f.start("Count.", map[string]any{"budgetCapUsd": 0.05})
			f.WaitStatus(id, "Paused")
			f.Post(id, "budget", map[string]any{"hardCapUsd": 5})
			f.Post(id, "resume", nil)
			f.WaitStatus(id, "Idle")
			f.FollowUp(id, "Go on.", "Queued")
			f.done()
		},
		"Output approved": func(t *testing.T) {
			f := newFlow(t, u, w, reply{blocks: []block{text("Done.")}})
			id := f.start("Say done.", nil)
			f.WaitReview(id)
			pid := f.SidecarPID(id)
			f.Post(id, "approve", nil)
			f.WaitStatus(id, "Completed")
			f.WaitGone(pid)
			f.done()
		},
		"Output rejected, then retried": func(t *testing.T) {
			f := newFlow(t, u, w,
				reply{blocks: []block{text("A first try.")}},
				reply{match: userSaid("again, better"), blocks: []block{text("A better try.")}})
			id := f.start("Try.", nil)
			f.WaitReview(id)
			pid := f.SidecarPID(id)
			f.Post(id, "reject", map[string]any{"reason": "not good"})
			f.Post(id, "retry", map[string]any{"additionalInstruction": "again, better"})
			f.WaitFor(id, "the retried run's output", func(s uptest.Session) bool {
				return s.Status == "Idle" && s.HasPendingReview && s.Metrics.TurnCount >= 2
			})
			assert.NotEqual(t, pid, f.SidecarPID(id), "the retried run has a sidecar of its own")
			f.done()
		},
		"Close": func(t *testing.T) {
			f := newFlow(t, u, w, sleep("toolu_wait", "timeout 60 tail -f /dev/null"))
			id := f.start("Wait.", nil)
			f.WaitActivity(id, "tail -f /dev/null")
			f.CloseAfterCrash(id)
		},
		"Context exhausted, handed off": func(t *testing.T) {
			f := newFlow(t, u, w, reply{inputTokens: 210000, blocks: []block{text("I have read the whole legacy package.")}})
			f.HandedOff(f.start("Migrate the legacy package.", nil))
		},
		"Auto-continue after a failed validation": func(t *testing.T) {
			f := newFlow(t, u, w,
				reply{blocks: []block{text("Done, I think.")}},
				reply{match: userSaid("3 tests failed"), blocks: []block{text("Fixed the 3 tests.")}})
			id := f.start("Fix the tests.", map[string]any{"autoContinue": map[string]any{"isEnabled": true, "maxContinuations": 1,
				"validationCriteria": []any{map[string]any{"type": "CustomCommand", "customCommand": "echo 3 tests failed; false"}}}})
			assert.Contains(t, f.Continuation(id), "3 tests failed")
			// Validation still fails after the one continuation: the loop
			// stops and leaves the session Idle, its output not offered for
			// review.
			f.WaitFor(id, "the loop stopped after the continuation's turn", func(s uptest.Session) bool {
				return s.Status == "Idle" && !s.HasPendingReview && s.Metrics.TurnCount >= 2
			})
			f.done()
		},
		"Skill enabled and reloaded": func(t *testing.T) {
			f := newFlow(t, u, w,
				reply{blocks: []block{text("Hello.")}},
				reply{match: all(userSaid("Greet me again."), systemHolds("Answer in haiku.")), blocks: []block{text("Morning light, hello.")}})
			var skill struct {
				ID string `json:"id"`
			}
			f.Must("POST", "/api/agents/skills", map[string]any{"name": "Haiku", "description": "Short answers",
				"instructions": "Answer in haiku."}, &skill)
			id := f.start("Say hello.", nil)
			f.WaitReview(id)
			f.Post(id, "skills/"+skill.ID+"/enable", nil)
			f.WaitActivity(id, "reload")
			f.FollowUp(id, "Greet me again.", "Queued")
			f.done()
		},
		"Sidecar killed mid-turn": func(t *testing.T) {
			// The CLI resumes a conversation without the model message whose
			// tool call the kill cut short; the rest is there.
			f := newFlow(t, u, w,
				reply{blocks: []block{text("Noted: kumquat."), toolUse("toolu_wait", "Bash", bash("timeout 60 tail -f /dev/null"))}},
				reply{match: all(userSaid("Which word was it?"), conversationHolds("Remember the word kumquat.")),
					blocks: []block{text("The word was kumquat.")}})
			id := f.start("Remember the word kumquat.", nil)
			f.WaitActivity(id, "tail -f /dev/null")
			pid := f.SidecarPID(id)
			require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
			f.NewSidecarPID(id, pid)
			f.WaitStatus(id, "Idle")
			f.FollowUp(id, "Which word was it?", "Queued")
			f.done()
		},
		"Restart of up": func(t *testing.T) {
			f := newFlow(t, u, w,
				reply{blocks: []block{text("Noted: quince.")}},
				reply{match: all(userSaid("Which word was it?"), conversationHolds("Remember the word quince.", "Noted: quince.")),
					blocks: []block{text("The word was quince.")}})
			id := f.start("Remember the word quince.", nil)
			f.WaitReview(id)
			pid := f.SidecarPID(id)
			u.stop()
			assert.True(t, uptest.ProcessGone(pid), "up stopped the sidecar")
			u.launch()
			f.FollowUp(id, "Which word was it?", "Queued")
			f.done()
		},
	})
}
