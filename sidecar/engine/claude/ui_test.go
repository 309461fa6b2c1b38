package claude_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/browsertest"
)

// TestDashboardAllowsAClaudeToolUse is a person at the dashboard of an up
// running the claude engine with the real CLI: they start a session whose
// every tool use waits for approval, read the command to approve as the
// agent wrote it with its countdown, allow it, and the agent runs it and
// goes on; their follow-up then shows in the conversation with its time.
func TestDashboardAllowsAClaudeToolUse(t *testing.T) {
	if testing.Short() {
		t.Skip("starts up with the claude engine and a browser; skipped with -short")
	}
	const command = "echo ready > status.txt && cat status.txt"
	w := newWorld(t,
		reply{match: userSaid("Write the status file."), blocks: []block{
			text("I will write the status file."), toolUse("toolu_status", "Bash", bash(command))}},
		reply{match: toolResultIs("toolu_status", "ready", false), blocks: []block{text("The status file says ready.")}},
		reply{match: userSaid("Now say goodbye."), blocks: []block{text("Goodbye from the agent.")}},
	)
	b := browsertest.New(t)
	u := startUp(t, w)
	b.SignIn(u.base, u.token)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the page: %s", b.Text("main"))
			t.Logf("up's log:\n%s", u.log)
		}
	})

	b.Run("write the objective",
		chromedp.SendKeys(chromedp.CSS("#objective"), "Write the status file."),
		chromedp.SendKeys(chromedp.CSS("#working-directory"), "ui-claude"))
	b.Choose("#start-approval", "All")
	b.Run("start", chromedp.Click(chromedp.CSS("#start")))
	b.WaitJS("the session page", `location.hash.startsWith("#/sessions/") && document.querySelector("#session-page") !== null`)
	id := strings.TrimPrefix(browsertest.Eval[string](b, "read the session id", `location.hash`), "#/sessions/")
	require.Len(t, id, 36)

	// The command reads as the agent wrote it, not as escaped JSON, with
	// the time left before it is denied.
	b.WaitText("#permission", "Allow Bash?")
	assert.Equal(t, "$ "+command, b.Text("#permission pre.command"))
	assert.NotContains(t, b.Text("#permission"), `\u003e`)
	assert.Regexp(t, `^Denied automatically in \d+:\d\d \(at \d\d:\d\d:\d\d\)$`, b.Text("#permission-countdown"))
	b.WaitText("#waiting", "Waiting for your allow or deny of Bash: "+command+" · since ")
	b.ClickText(`//div[@id="permission"]`, "Allow")

	// The agent runs it and goes on.
	b.WaitText("#activity", "Allowed Bash")
	b.WaitText("#activity", "The status file says ready.")
	b.WaitText("#review", "Output to review")
	var detail struct {
		WorkingDirectory string `json:"workingDirectory"`
	}
	u.Must(http.MethodGet, "/api/agents/sessions/"+id, nil, &detail)
	written, err := os.ReadFile(filepath.Join(detail.WorkingDirectory, "status.txt"))
	require.NoError(t, err, "the allowed command ran")
	assert.Equal(t, "ready\n", string(written))

	// The person's follow-up is in the conversation, with its time, and
	// the agent answers it.
	b.Run("write a follow-up", chromedp.SendKeys(chromedp.CSS("#message"), "Now say goodbye."))
	b.Run("send it", chromedp.Click(chromedp.CSS("#send")))
	b.WaitJS("the follow-up in the timeline", `[...document.querySelectorAll("#activity .item.user")].some(e =>
		e.querySelector(".text")?.innerText === "Now say goodbye." && /^\d\d:\d\d:\d\d$/.test(e.querySelector("time")?.innerText ?? ""))`)
	b.WaitText("#activity", "Goodbye from the agent.")
	b.WaitJS("the follow-up delivered", `[...document.querySelectorAll('#activity .item.user[data-state="Delivered"]')].some(e => e.innerText.includes("Now say goodbye."))`)
	assert.Zero(t, w.model.remaining(), "the model answered every scripted turn")
}
