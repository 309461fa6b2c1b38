package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentbus/agentbus/internal/browsertest"
)

// fill sets an input's value as typing it would, replacing what it held.
func (b *browser) fill(selector, value string) {
	b.T.Helper()
	browsertest.Eval[bool](b.Browser, "fill "+selector, fmt.Sprintf(`(() => { const e = document.querySelector(%s); e.value = %s; e.dispatchEvent(new Event("input", {bubbles: true})); return true })()`,
		browsertest.JS(selector), browsertest.JS(value)))
}

// screenshot saves the page as name (see screenshotFile).
func (b *browser) screenshot(name string) {
	b.T.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, 2*time.Minute)
	defer cancel()
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(b.T, err, "screenshot %s", name)
	file := screenshotFile(b.T, name)
	require.NoError(b.T, os.WriteFile(file, shot, 0o644))
	b.T.Logf("screenshot: %s (%d bytes)", file, len(shot))
}

// TestDashboardConfiguresDecidesAndReviews is a person at the dashboard
// who creates a template with tool approval, starts a session from it,
// reads the commands awaiting approval and allows one and denies the
// other before their countdown ends, rejects the output and retries,
// pauses a session during a tool call and reads what it waits for, and
// finds and cancels sessions from the list.
func TestDashboardConfiguresDecidesAndReviews(t *testing.T) {
	if testing.Short() {
		t.Skip("starts up with the real runtime and a browser; skipped with -short")
	}
	t.Setenv("AGENTBUS_TRACE_URL", "http://jaeger.example:16686/trace/{traceId}")
	u := startUpWithRuntime(t)
	b := newBrowser(t)
	b.Run("open the dashboard", chromedp.Navigate(u.base+"/ui/"))
	b.Run("paste the token", chromedp.WaitVisible(chromedp.CSS("#token")), chromedp.SendKeys(chromedp.CSS("#token"), u.token))
	b.Run("sign in", chromedp.Click(chromedp.CSS("#signin")))
	b.WaitText("#pool", "Pool ")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the page: %s", browsertest.Eval[string](b.Browser, "read the page", `document.querySelector("main")?.innerText ?? document.body.innerText`))
		}
	})

	// A template, created in the editor: every tool use waits for approval.
	b.Run("open the templates", chromedp.Navigate(u.base+"/ui/#/templates"))
	b.WaitText("main", "None yet")
	b.Run("new template", chromedp.Click(chromedp.CSS("#new-template")))
	b.Run("name it", chromedp.WaitVisible(chromedp.CSS("#template-name")), chromedp.SendKeys(chromedp.CSS("#template-name"), "Careful clean-up"))
	b.fill("#template-description", "Clean up the build, asking before each step")
	b.fill("#template-tools", "Read, Edit, Bash, Write")
	b.fill("#template-budget", "3")
	b.Choose("#template-approval", "All")
	b.fill("#template-cron", "0 8 * * 1-5")
	b.Run("create it", chromedp.Click(chromedp.CSS("#save-template")))
	b.WaitJS("the template's page", `/^#\/templates\/[0-9a-f-]{36}$/.test(location.hash)`)
	b.WaitText("#template-editor", "Careful clean-up v1")
	b.WaitText("#template-next-run", "Next run: ")
	b.WaitText("#templates-list", "Careful clean-up")
	b.screenshot("template-editor.png")
	templateID := strings.TrimPrefix(browsertest.Eval[string](b.Browser, "read the template id", `location.hash`), "#/templates/")

	// A session from it, started from the list's form.
	b.Run("start from the template", chromedp.Navigate(u.base+"/ui/#/sessions?template="+templateID))
	b.WaitJS("the template chosen", fmt.Sprintf(`document.querySelector("#start-template")?.value === %s`, browsertest.JS(templateID)))
	b.Run("write the objective",
		chromedp.SendKeys(chromedp.CSS("#objective"), "Clean up [scenario:permission]"),
		chromedp.SendKeys(chromedp.CSS("#working-directory"), "ui-permission"),
		chromedp.Click(chromedp.CSS("#start")))
	b.WaitJS("the session page", `location.hash.startsWith("#/sessions/") && document.querySelector("#session-page") !== null`)
	id := strings.TrimPrefix(browsertest.Eval[string](b.Browser, "read the session id", `location.hash`), "#/sessions/")

	// The command to approve reads as a command, with its countdown, and
	// the page says what the session waits for.
	b.WaitText("#permission", "Allow Bash?")
	assert.Equal(t, "$ rm -rf build/", browsertest.Eval[string](b.Browser, "read the command", `document.querySelector("#permission pre.command").innerText`))
	assert.Regexp(t, `^Denied automatically in \d+:\d\d \(at \d\d:\d\d:\d\d\)$`,
		browsertest.Eval[string](b.Browser, "read the countdown", `document.querySelector("#permission-countdown").innerText`))
	b.WaitText("#waiting", "Waiting for your allow or deny of Bash: rm -rf build/ · since ")
	assert.Regexp(t, `\d+:\d\d left$`, browsertest.Eval[string](b.Browser, "read the waiting line", `document.querySelector("#waiting").innerText`))
	b.screenshot("session.png")
	b.ClickText(`//div[@id="permission"]`, "Allow")
	b.WaitText("#permission", "Allow Write?")
	b.WaitText("#permission", "+ port: 8080")
	b.Run("give a reason", chromedp.SendKeys(chromedp.CSS("#permission input"), "Keep the old config"))
	b.ClickText(`//div[@id="permission"]`, "Deny")
	b.WaitText("#activity", "Denied Write")
	b.WaitText("#activity", "Allowed Bash")

	// The review: rejected with a reason, the failed session retried,
	// then approved; an ended session offers no more controls.
	b.WaitText("#review", "Output to review")
	assert.Equal(t, "rgb(255, 255, 255)", browsertest.Eval[string](b.Browser, "read the reject button's colour", `getComputedStyle(document.querySelector("#reject")).backgroundColor`),
		"Reject ranks below Approve")
	b.Run("give the reason", chromedp.SendKeys(chromedp.CSS("#review input"), "Keep the build directory"))
	b.Run("reject", chromedp.Click(chromedp.CSS("#reject")))
	b.WaitText("#session-status", "Failed")
	b.WaitText("#failed", "Failed")
	b.Run("retry", chromedp.Click(chromedp.CSS("#retry-failed")))
	b.WaitText("#permission", "Allow Bash?")
	b.ClickText(`//div[@id="permission"]`, "Allow")
	b.WaitText("#permission", "Allow Write?")
	b.ClickText(`//div[@id="permission"]`, "Allow")
	b.WaitText("#review", "Output to review")
	b.Run("approve", chromedp.Click(chromedp.CSS("#approve")))
	b.WaitText("#session-status", "Completed")
	b.WaitJS("no controls left", `!document.querySelector("#composer") && !document.querySelector("#pause") && !document.querySelector("#budget button")`)
	assert.Equal(t, "Completed", u.Session(id).Status)

	// A pause during a tool call waits for the call, and says so.
	b.Run("back to the list", chromedp.Navigate(u.base+"/ui/#/sessions"))
	b.Run("start a long session",
		chromedp.WaitVisible(chromedp.CSS("#objective")),
		chromedp.SendKeys(chromedp.CSS("#objective"), "Run the suite [scenario:long]"),
		chromedp.SendKeys(chromedp.CSS("#working-directory"), "ui-long"),
		chromedp.Click(chromedp.CSS("#start")))
	b.WaitText("#waiting", "Waiting for tool call Bash: make integration-test")
	b.WaitJS("pause to be possible", `document.querySelector("#pause")?.disabled === false`)
	b.Run("pause", chromedp.Click(chromedp.CSS("#pause")))
	b.WaitText("#waiting", "Waiting for tool call Bash: make integration-test (the session pauses once it ends) · since ")
	b.WaitText("#session-status", "Pausing…")
	// A session takes one request at a time: cancel waits for the pause,
	// and the page says so.
	assert.True(t, browsertest.Eval[bool](b.Browser, "read the cancel button", `document.querySelector("#cancel").disabled`), "cancel waits for the pause")
	b.WaitText("#cancel-note", "Cancel once it has paused: it pauses when the running tool call ends.")

	// The list: a search finds the session, a filter the template's, a
	// chain reads as lineage, and a finished session is cancelled in bulk.
	traceID := trace.TraceID(uuid.New())
	hello := u.startTraced(traceID, map[string]any{"workingDirectory": "ui-hello", "objective": "Say hello", "budgetCapUsd": 5})
	u.waitReview(hello)

	// A session started in a trace links to it in the tracing UI.
	b.Run("the traced session", chromedp.Navigate(u.base+"/ui/#/sessions/"+hello))
	b.WaitText("#trace", "trace "+traceID.String())
	assert.Equal(t, "http://jaeger.example:16686/trace/"+traceID.String(), browsertest.Eval[string](b.Browser, "read the trace link", `document.querySelector("#trace a").href`))
	handoff := u.start(map[string]any{"workingDirectory": "ui-handoff", "objective": "Migrate the legacy package [scenario:handoff]"})
	b.Run("the list", chromedp.Navigate(u.base+"/ui/#/sessions"))
	b.WaitJS("five rows", `document.querySelectorAll("#sessions tbody tr").length === 5`)
	b.WaitJS("the chain's first session", fmt.Sprintf(`document.querySelector('tr[data-session=%s]')?.dataset.position === "1"`, browsertest.JS(handoff)))
	b.WaitText(`tr[data-position="2"] .lineage`, "↳ continues Migrate the legacy package [scenario:handoff] · chain 2/2")
	assert.Equal(t, handoff, browsertest.Eval[string](b.Browser, "read the row above the continuation",
		`document.querySelector('tr[data-position="2"]').previousElementSibling.dataset.session`), "a continuation follows the session it continues")
	assert.Equal(t, "chain 1/2", browsertest.Eval[string](b.Browser, "read the first session's lineage",
		fmt.Sprintf(`document.querySelector('tr[data-session=%s] .lineage').innerText.trim()`, browsertest.JS(handoff))))
	b.Choose("#template-filter", templateID)
	b.WaitJS("the template's session only", fmt.Sprintf(`(() => { const rows = document.querySelectorAll("#sessions tbody tr"); return rows.length === 1 && rows[0].dataset.session === %s })()`, browsertest.JS(id)))
	b.WaitText("#sessions tbody tr", "Careful clean-up")
	b.Choose("#template-filter", "")
	b.WaitJS("five rows again", `document.querySelectorAll("#sessions tbody tr").length === 5`)
	b.Run("search", chromedp.SendKeys(chromedp.CSS("#search"), "say hello"))
	b.WaitJS("one row", `document.querySelectorAll("#sessions tbody tr").length === 1`)
	b.Run("pick it", chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-session=%s] input.pick`, browsertest.JS(hello)))))
	b.Run("cancel it", chromedp.Click(chromedp.CSS("#cancel-selected")))
	u.waitStatus(hello, "Cancelled")
	b.fill("#search", "")
	b.WaitJS("all rows", `document.querySelectorAll("#sessions tbody tr").length === 5`)
	b.screenshot("sessions.png")
}
