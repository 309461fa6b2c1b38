package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"

	"github.com/agentbus/agentbus/internal/uptest"
)

// testCLIDecisions allows and denies a session's tool uses and approves
// and rejects a plan with the command line, against up's real runtime.
func testCLIDecisions(t *testing.T, u *upUnderTest, c *cliUnderTest) {
	c.fails(2, "--approval-timeout and --on-timeout go with --tool-approval",
		"sessions", "start", "Clean up", "--budget", "5", "--approval-timeout", "5")
	c.fails(5, "body.toolApproval.onTimeout",
		"sessions", "start", "Clean up", "--budget", "5", "--tool-approval", "all", "--on-timeout", "Maybe")

	id := c.id("sessions", "start", "Clean up [scenario:permission]", "--dir", "cli-permission", "--budget", "5",
		"--tool-approval", "Bash,Write", "--approval-timeout", "600")
	u.waitStatus(id, "WaitingForApproval")
	assert.Regexp(t, `(?m)^Permission\s+Bash \$ rm -rf build/ \(request [0-9a-f-]+; Deny at \d\d:\d\d:\d\d unless decided\)$`,
		c.must("sessions", "show", id))
	c.fails(4, "no such tool permission request is pending", "sessions", "allow", id, uuid.NewString())
	assert.Equal(t, id+" Running\n", c.must("sessions", "allow", id))

	u.WaitFor(id, "the second permission", func(s uptest.Session) bool { return s.Status == "WaitingForApproval" })
	assert.Regexp(t, `(?m)^Permission\s+Write /\S+/config.yaml \+ port: 8080 \(request`, c.must("sessions", "show", id))
	assert.Equal(t, id+" Running\n", c.must("sessions", "deny", id, "--message", "Keep the old config"))
	u.waitReview(id)
	c.fails(4, "waits for no permission", "sessions", "deny", id)
	c.must("sessions", "approve", id)
	watched := c.must("sessions", "watch", id)
	assert.Contains(t, watched, "→ Bash     $ rm -rf build/\n")
	assert.Regexp(t, `→ Write    /\S+/config.yaml\n {21}\+ port: 8080\n`, watched)

	plan := c.id("sessions", "start", "Validate input [scenario:plan]", "--dir", "cli-plan", "--budget", "5")
	u.waitStatus(plan, "WaitingForApproval")
	c.fails(2, "--feedback is required", "sessions", "plan", "reject", plan)
	c.fails(2, `want approve or reject, got "maybe"`, "sessions", "plan", "maybe", plan)
	assert.Equal(t, plan+" Running\n", c.must("sessions", "plan", "reject", plan, "--feedback", "Return 400, not 422"))
	u.waitStatus(plan, "WaitingForApproval")
	assert.Equal(t, plan+" Running\n", c.must("sessions", "plan", "approve", plan))
	u.waitReview(plan)
	c.fails(4, "Conflict", "sessions", "plan", "approve", plan)
}

// testCLICatalog creates, shows, lists, edits and deactivates a template
// and a skill with the command line, and starts a session from the
// template.
func testCLICatalog(t *testing.T, u *upUnderTest, c *cliUnderTest) {
	skill := c.id("skills", "create", "Go style", "--description", "How we write Go",
		"--instructions", "Doc comments start with the name.")
	c.fails(5, "required property description", "skills", "create", "No description")
	assert.Regexp(t, `(?m)^`+skill+`\s+Go style\s+1\s+yes\s+How we write Go$`, c.must("skills", "ls"))
	assert.Contains(t, c.must("skills", "show", skill), "\nDoc comments start with the name.\n")
	file := filepath.Join(t.TempDir(), "instructions.md")
	if err := os.WriteFile(file, []byte("Errors are wrapped with %w."), 0o600); err != nil {
		t.Fatal(err)
	}
	assert.Equal(t, skill+"\n", c.must("skills", "edit", skill, "--instructions-file", file))
	assert.Contains(t, c.must("skills", "show", skill), "\nErrors are wrapped with %w.\n")
	c.fails(3, "Not Found", "skills", "edit", uuid.NewString(), "--name", "Other")
	c.fails(2, "--instructions-file", "skills", "edit", skill, "--instructions-file", filepath.Join(t.TempDir(), "missing"))

	tmpl := c.id("templates", "create", "Nightly checks", "--model", "claude-sonnet-4-5", "--budget", "3",
		"--tools", "Read,Bash", "--prompt", "Run the checks; report failures.", "--skill", skill,
		"--tool-approval", "Bash", "--schedule", "0 8 * * 1-5", "--time-zone", "Europe/Lisbon")
	c.fails(5, "required property modelId", "templates", "create", "No model", "--budget", "3")
	c.fails(5, "body.schedule.cronExpression", "templates", "create", "Bad cron", "--model", "m", "--budget", "3", "--tools", "Read", "--schedule", "every day")
	assert.Regexp(t, `(?m)^`+tmpl+`\s+Nightly checks\s+claude-sonnet-4-5\s+\$3\.00\s+yes\s+yes\s+`,
		c.must("templates", "ls", "--active"))
	show := c.must("templates", "show", tmpl)
	assert.Regexp(t, `(?m)^Schedule\s+0 8 \* \* 1-5 Europe/Lisbon, next \d{4}-\d\d-\d\d 0[78]:00:00$`, show)
	assert.Regexp(t, `(?m)^Tool approval\s+Bash \(waits 120s, then Deny\)$`, show)
	assert.Regexp(t, `(?m)^Tools\s+Read, Bash$`, show)
	assert.Regexp(t, `(?m)^Skills\s+`+skill+`$`, show)
	assert.Equal(t, tmpl+" version 2\n", c.must("templates", "edit", tmpl, "--budget", "4", "--no-schedule"))
	assert.Regexp(t, `(?m)^Schedule\s+-$`, c.must("templates", "show", tmpl))
	c.fails(2, "skills are not changed by edit", "templates", "edit", tmpl, "--skill", skill)
	c.fails(3, "Not Found", "templates", "show", uuid.NewString())

	id := c.id("sessions", "start", "Say hello", "--template", tmpl, "--dir", "cli-template")
	assert.Regexp(t, `(?m)^Cost\s+\$\S+ of \$4\.00`, c.must("sessions", "show", id))
	assert.Equal(t, tmpl+" inactive\n", c.must("templates", "deactivate", tmpl))
	assert.Contains(t, c.must("templates", "ls", "--inactive"), tmpl)
	c.fails(2, "--active and --inactive exclude each other", "templates", "ls", "--active", "--inactive")
	c.fails(4, "Conflict", "sessions", "start", "Say hello again", "--template", tmpl)
	assert.Equal(t, skill+" inactive\n", c.must("skills", "deactivate", skill))
	assert.Equal(t, tmpl+" active\n", c.must("templates", "activate", tmpl))
}
