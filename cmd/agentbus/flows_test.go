package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/uptest"
)

// newUser is a user of its own on the deployment: each flow has its own
// pool, directories and sessions.
func (u *upUnderTest) newUser(t *testing.T) *uptest.Client {
	t.Helper()
	return u.As(t, runtimeSecret, uuid.NewString())
}

// suite starts the scenario of two-second tool calls and waits for its
// first call: a turn with a safe point every two seconds.
func suite(f *uptest.Client) (id string, pid int) {
	f.T.Helper()
	id = f.Start("Run the suite [scenario:suite]", nil)
	f.WaitStatus(id, "Running")
	f.WaitActivity(id, "go test ./integration/")
	return id, f.SidecarPID(id)
}

// TestEveryFlowWithTheScriptEngine runs every flow of the README's table
// through up's real runtime, each session's agent a sidecar process of
// the script engine.
func TestEveryFlowWithTheScriptEngine(t *testing.T) {
	u := startUpWithRuntime(t)
	uptest.RunFlows(t, uptest.EngineScript, map[string]func(*testing.T){
		"Follow-up on an Idle session": func(t *testing.T) {
			f := u.newUser(t)
			id := f.Start("Say hello", nil)
			f.WaitReview(id)
			pid := f.SidecarPID(id)
			f.FollowUp(id, "Now say goodbye", "Queued")
			f.WaitActivity(id, "Understood: Now say goodbye")
			assert.Equal(t, pid, f.SidecarPID(id), "one sidecar served both turns")
		},
		"Immediate steering mid-turn": func(t *testing.T) {
			f := u.newUser(t)
			id, _ := suite(f)
			f.WaitDelivered(id, f.Enqueue(id, "Skip the slow packages", "Immediate"))
			f.WaitActivity(id, "Understood: Skip the slow packages")
			f.Post(id, "cancel", nil)
			f.WaitStatus(id, "Cancelled")
		},
		"Queued message after the turn": func(t *testing.T) {
			f := u.newUser(t)
			id := f.Start("Pick a database [scenario:question]", nil)
			f.WaitStatus(id, "WaitingForInput")
			m := f.Enqueue(id, "Then write the migration", "Queued")
			f.Post(id, "answer", map[string]any{"answer": "PostgreSQL"})
			f.WaitDelivered(id, m)
			f.WaitReview(id)
			activity := f.Activity(id)
			assert.Less(t, strings.Index(activity, "PostgreSQL"), strings.Index(activity, "Understood: Then write the migration"),
				"the queued message reached the agent after the turn that took the answer")
		},
		"Question and answer": func(t *testing.T) {
			f := u.newUser(t)
			id := f.Start("Pick a database [scenario:question]", nil)
			f.WaitStatus(id, "WaitingForInput")
			f.Post(id, "answer", map[string]any{"answer": "PostgreSQL"})
			f.WaitReview(id)
			f.WaitActivity(id, "PostgreSQL")
		},
		"Plan approved": func(t *testing.T) {
			f := u.newUser(t)
			id := f.Start("Validate input [scenario:plan]", nil)
			f.WaitStatus(id, "WaitingForApproval")
			f.Post(id, "plan/approve", nil)
			f.WaitReview(id)
			f.WaitActivity(id, "Carrying out the plan.")
		},
		"Plan rejected, then approved": func(t *testing.T) {
			f := u.newUser(t)
			id := f.Start("Validate input [scenario:plan]", nil)
			f.WaitStatus(id, "WaitingForApproval")
			f.Post(id, "plan/reject", map[string]any{"feedback": "Return 400, not 422"})
			f.WaitActivity(id, "Return 400, not 422")
			f.WaitStatus(id, "WaitingForApproval")
			f.Post(id, "plan/approve", nil)
			f.WaitReview(id)
		},
		"Tool permission allowed": func(t *testing.T) {
			f := u.newUser(t)
			id := f.Start("Clean up [scenario:permission]", map[string]any{"toolApproval": map[string]any{"mode": "All", "timeoutSeconds": 600}})
			f.Post(id, "permissions/"+f.Permission(id, "Bash")+"/allow", nil)
			f.Post(id, "permissions/"+f.Permission(id, "Write")+"/allow", nil)
			f.WaitReview(id)
			f.WaitActivity(id, "Finished the clean-up.")
		},
		"Tool permission denied": func(t *testing.T) {
			f := u.newUser(t)
			id := f.Start("Clean up [scenario:permission]", map[string]any{"toolApproval": map[string]any{"mode": "All", "timeoutSeconds": 600}})
			f.Post(id, "permissions/"+f.Permission(id, "Bash")+"/deny", map[string]any{"message": "Keep the build directory"})
			f.WaitActivity(id, "Keep the build directory")
			f.Post(id, "permissions/"+f.Permission(id, "Write")+"/allow", nil)
			f.WaitReview(id)
		},
		"Tool permission timed out": func(t *testing.T) {
			f := u.newUser(t)
			id := f.Start("Clean up [scenario:permission]", map[string]any{
				"toolApproval": map[string]any{"mode": "All", "timeoutSeconds": 1, "onTimeout": "Deny"}})
			f.WaitStatus(id, "WaitingForApproval")
			f.WaitReview(id)
		},
		"Pause and resume during a tool call": func(t *testing.T) {
			f := u.newUser(t)
			id, pid := suite(f)
			f.Post(id, "pause", nil)
			f.WaitStatus(id, "Paused")
			f.Post(id, "resume", nil)
			f.WaitStatus(id, "Running")
			assert.Equal(t, pid, f.SidecarPID(id), "the paused agent went on in its own sidecar")
			f.Post(id, "cancel", nil)
			f.WaitStatus(id, "Cancelled")
		},
		"Interrupt": func(t *testing.T) {
			f := u.newUser(t)
			id, _ := suite(f)
			f.Post(id, "interrupt", nil)
			f.WaitStatus(id, "Interrupted")
			f.WaitDelivered(id, f.Enqueue(id, "Only run the unit tests", "Queued"))
			f.WaitActivity(id, "Understood: Only run the unit tests")
			f.Post(id, "cancel", nil)
			f.WaitStatus(id, "Cancelled")
		},
		"Cancel": func(t *testing.T) {
			f := u.newUser(t)
			id, pid := suite(f)
			f.Post(id, "cancel", nil)
			f.WaitStatus(id, "Cancelled")
			f.WaitGone(pid)
		},
		"Force cancel": func(t *testing.T) {
			f := u.newUser(t)
			id, pid := suite(f)
			f.Post(id, "force-cancel", nil)
			f.WaitStatus(id, "Cancelled")
			f.WaitGone(pid)
		},
		"Budget spent, raised, resumed": func(t *testing.T) {
			f := u.newUser(t)
			id := f.Start("Add input validation", map[string]any{"budgetCapUsd": 0.01})
			f.WaitStatus(id, "Paused")
			f.Post(id, "budget", map[string]any{"hardCapUsd": 5})
			f.Post(id, "resume", nil)
			f.WaitReview(id)
		},
		"Output approved": func(t *testing.T) {
			f := u.newUser(t)
			id := f.Start("Add input validation", nil)
			f.WaitReview(id)
			pid := f.SidecarPID(id)
			f.Post(id, "approve", nil)
			f.WaitStatus(id, "Completed")
			f.WaitGone(pid)
		},
		"Output rejected, then retried": func(t *testing.T) {
			f := u.newUser(t)
			id := f.Start("Add input validation", nil)
			first := f.WaitReview(id)
			pid := f.SidecarPID(id)
			// The retry follows the rejection at once: the rejected run's
			// end must not undo it.
			f.Post(id, "reject", map[string]any{"reason": "not good"})
			f.Post(id, "retry", map[string]any{"additionalInstruction": "again, better"})
			s := f.WaitFor(id, "Idle with the retried run's output", func(s uptest.Session) bool {
				return s.Status == "Idle" && s.HasPendingReview && s.Metrics.TurnCount >= 2*first.Metrics.TurnCount
			})
			assert.Equal(t, 2*first.Metrics.TurnCount, s.Metrics.TurnCount, "the retried run took as many turns as the first")
			assert.NotEqual(t, pid, f.SidecarPID(id), "the retried run has a sidecar of its own")
			f.WaitGone(pid)
		},
		"Close": func(t *testing.T) {
			f := u.newUser(t)
			id := f.Start("Run the suite [scenario:long]", nil)
			f.WaitActivity(id, "integration")
			f.CloseAfterCrash(id)
		},
		"Context exhausted, handed off": func(t *testing.T) {
			f := u.newUser(t)
			f.HandedOff(f.Start("Migrate the legacy package [scenario:exhaust]", nil))
		},
		"Voluntary handoff": func(t *testing.T) {
			f := u.newUser(t)
			f.HandedOff(f.Start("Migrate the legacy package [scenario:handoff]", nil))
		},
		"Auto-continue after a failed validation": func(t *testing.T) {
			f := u.newUser(t)
			id := f.Start("Say hello", map[string]any{"autoContinue": map[string]any{"isEnabled": true, "maxContinuations": 1,
				"validationCriteria": []any{map[string]any{"type": "CustomCommand", "customCommand": "echo 3 tests failed; false"}}}})
			assert.Contains(t, f.Continuation(id), "3 tests failed", "the continuation tells the agent what the validation printed")
			// Validation still fails after the one continuation: the loop
			// stops and leaves the session Idle, its output not offered for
			// review.
			f.WaitFor(id, "the loop stopped after the continuation's turn", func(s uptest.Session) bool {
				return s.Status == "Idle" && !s.HasPendingReview && s.Metrics.TurnCount >= 2
			})
			f.WaitActivity(id, "Understood: ")
		},
		"Skill enabled and reloaded": func(t *testing.T) {
			f := u.newUser(t)
			var skill struct {
				ID string `json:"id"`
			}
			f.Must(http.MethodPost, "/api/agents/skills", map[string]any{"name": "Haiku", "description": "Short answers",
				"instructions": "Answer in haiku."}, &skill)
			id := f.Start("Say hello", nil)
			f.WaitReview(id)
			pid := f.SidecarPID(id)
			f.Post(id, "skills/"+skill.ID+"/enable", nil)
			f.FollowUp(id, "Your instructions are: {{system_prompt}}", "Queued")
			f.WaitActivity(id, "Your instructions are: Answer in haiku.")
			assert.Equal(t, pid, f.SidecarPID(id), "the running agent reloaded its config")
		},
		"Sidecar killed mid-turn": func(t *testing.T) {
			f := u.newUser(t)
			id := f.Start("Run the suite [scenario:long]", nil)
			f.WaitActivity(id, "integration")
			pid := f.SidecarPID(id)
			require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
			f.NewSidecarPID(id, pid)
			f.WaitStatus(id, "Idle")
			f.FollowUp(id, "Report what you have", "Queued")
		},
		"Restart of up": func(t *testing.T) {
			f := u.newUser(t)
			id := f.Start("Say hello", nil)
			f.WaitReview(id)
			pid := f.SidecarPID(id)
			u.stop()
			assert.True(t, uptest.ProcessGone(pid), "up stopped the sidecar")
			u.launch()
			f.FollowUp(id, "What did you do before?", "Queued")
			assert.NotEqual(t, pid, f.SidecarPID(id))
			assert.Contains(t, f.Activity(id), `\"resumed\":true`, "the new sidecar resumed the agent")
		},
	})
}

// TestTheREADMEListsEveryFlow keeps the README's table of flows the one
// the flow tests run.
func TestTheREADMEListsEveryFlow(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	assert.Contains(t, string(readme), uptest.FlowTable(), "the README's table of flows differs from uptest.Flows")
}
