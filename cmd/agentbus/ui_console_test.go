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
)

// fill sets an input's value as typing it would, replacing what it held.
func (b *browser) fill(selector, value string) {
	b.t.Helper()
	eval[bool](b, "fill "+selector, fmt.Sprintf(`(() => { const e = document.querySelector(%s); e.value = %s; e.dispatchEvent(new Event("input", {bubbles: true})); return true })()`,
		jsString(selector), jsString(value)))
}

// screenshot saves the page as name (see screenshotFile).
func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(b.t, err, "screenshot %s", name)
	file := screenshotFile(b.t, name)
	require.NoError(b.t, os.WriteFile(file, shot, 0o644))
	b.t.Logf("screenshot: %s (%d bytes)", file, len(shot))
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
	b.run("open the dashboard", chromedp.Navigate(u.base+"/ui/"))
	b.run("paste the token", chromedp.WaitVisible(chromedp.CSS("#token")), chromedp.SendKeys(chromedp.CSS("#token"), u.token))
	b.run("sign in", chromedp.Click(chromedp.CSS("#signin")))
	b.waitText("#pool", "Pool ")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the page: %s", eval[string](b, "read the page", `document.querySelector("main")?.innerText ?? document.body.innerText`))
		}
	})

	// A template, created in the editor: every tool use waits for approval.
	b.run("open the templates", chromedp.Navigate(u.base+"/ui/#/templates"))
	b.waitText("main", "None yet")
	b.run("new template", chromedp.Click(chromedp.CSS("#new-template")))
	b.run("name it", chromedp.WaitVisible(chromedp.CSS("#template-name")), chromedp.SendKeys(chromedp.CSS("#template-name"), "Careful clean-up"))
	b.fill("#template-description", "Clean up the build, asking before each step")
	b.fill("#template-tools", "Read, Edit, Bash, Write")
	b.fill("#template-budget", "3")
	b.choose("#template-approval", "All")
	b.fill("#template-cron", "0 8 * * 1-5")
	b.run("create it", chromedp.Click(chromedp.CSS("#save-template")))
	b.waitJS("the template's page", `/^#\/templates\/[0-9a-f-]{36}$/.test(location.hash)`)
	b.waitText("#template-editor", "Careful clean-up v1")
	b.waitText("#template-next-run", "Next run: ")
	b.waitText("#templates-list", "Careful clean-up")
	b.screenshot("template-editor.png")
	templateID := strings.TrimPrefix(eval[string](b, "read the template id", `location.hash`), "#/templates/")

	// A session from it, started from the list's form.
	b.run("start from the template", chromedp.Navigate(u.base+"/ui/#/sessions?template="+templateID))
	b.waitJS("the template chosen", fmt.Sprintf(`document.querySelector("#start-template")?.value === %s`, jsString(templateID)))
	b.run("write the objective",
		chromedp.SendKeys(chromedp.CSS("#objective"), "Clean up [scenario:permission]"),
		chromedp.SendKeys(chromedp.CSS("#working-directory"), "ui-permission"),
		chromedp.Click(chromedp.CSS("#start")))
	b.waitJS("the session page", `location.hash.startsWith("#/sessions/") && document.querySelector("#session-page") !== null`)
	id := strings.TrimPrefix(eval[string](b, "read the session id", `location.hash`), "#/sessions/")

	// The command to approve reads as a command, with its countdown, and
	// the page says what the session waits for.
	b.waitText("#permission", "Allow Bash?")
	assert.Equal(t, "$ rm -rf build/", eval[string](b, "read the command", `document.querySelector("#permission pre.command").innerText`))
	assert.Regexp(t, `^Denied automatically in \d+:\d\d \(at \d\d:\d\d:\d\d\)$`,
		eval[string](b, "read the countdown", `document.querySelector("#permission-countdown").innerText`))
	b.waitText("#waiting", "Waiting for your allow or deny of Bash: rm -rf build/ · since ")
	assert.Regexp(t, `\d+:\d\d left$`, eval[string](b, "read the waiting line", `document.querySelector("#waiting").innerText`))
	b.screenshot("session.png")
	b.clickText(`//div[@id="permission"]`, "Allow")
	b.waitText("#permission", "Allow Write?")
	b.waitText("#permission", "+ port: 8080")
	b.run("give a reason", chromedp.SendKeys(chromedp.CSS("#permission input"), "Keep the old config"))
	b.clickText(`//div[@id="permission"]`, "Deny")
	b.waitText("#activity", "Denied Write")
	b.waitText("#activity", "Allowed Bash")

	// The review: rejected with a reason, the failed session retried,
	// then approved; an ended session offers no more controls.
	b.waitText("#review", "Output to review")
	assert.Equal(t, "rgb(255, 255, 255)", eval[string](b, "read the reject button's colour", `getComputedStyle(document.querySelector("#reject")).backgroundColor`),
		"Reject ranks below Approve")
	b.run("give the reason", chromedp.SendKeys(chromedp.CSS("#review input"), "Keep the build directory"))
	b.run("reject", chromedp.Click(chromedp.CSS("#reject")))
	b.waitText("#session-status", "Failed")
	b.waitText("#failed", "Failed")
	b.run("retry", chromedp.Click(chromedp.CSS("#retry-failed")))
	b.waitText("#permission", "Allow Bash?")
	b.clickText(`//div[@id="permission"]`, "Allow")
	b.waitText("#permission", "Allow Write?")
	b.clickText(`//div[@id="permission"]`, "Allow")
	b.waitText("#review", "Output to review")
	b.run("approve", chromedp.Click(chromedp.CSS("#approve")))
	b.waitText("#session-status", "Completed")
	b.waitJS("no controls left", `!document.querySelector("#composer") && !document.querySelector("#pause") && !document.querySelector("#budget button")`)
	assert.Equal(t, "Completed", u.Session(id).Status)

	// A pause during a tool call waits for the call, and says so.
	b.run("back to the list", chromedp.Navigate(u.base+"/ui/#/sessions"))
	b.run("start a long session",
		chromedp.WaitVisible(chromedp.CSS("#objective")),
		chromedp.SendKeys(chromedp.CSS("#objective"), "Run the suite [scenario:long]"),
		chromedp.SendKeys(chromedp.CSS("#working-directory"), "ui-long"),
		chromedp.Click(chromedp.CSS("#start")))
	b.waitText("#waiting", "Waiting for tool call Bash: make integration-test")
	b.waitJS("pause to be possible", `document.querySelector("#pause")?.disabled === false`)
	b.run("pause", chromedp.Click(chromedp.CSS("#pause")))
	b.waitText("#waiting", "Waiting for tool call Bash: make integration-test (the session pauses once it ends) · since ")
	b.waitText("#session-status", "Pausing…")
	// A session takes one request at a time: cancel waits for the pause,
	// and the page says so.
	assert.True(t, eval[bool](b, "read the cancel button", `document.querySelector("#cancel").disabled`), "cancel waits for the pause")
	b.waitText("#cancel-note", "Cancel once it has paused: it pauses when the running tool call ends.")

	// The list: a search finds the session, a filter the template's, a
	// chain reads as lineage, and a finished session is cancelled in bulk.
	traceID := trace.TraceID(uuid.New())
	hello := u.startTraced(traceID, map[string]any{"workingDirectory": "ui-hello", "objective": "Say hello", "budgetCapUsd": 5})
	u.waitReview(hello)

	// A session started in a trace links to it in the tracing UI.
	b.run("the traced session", chromedp.Navigate(u.base+"/ui/#/sessions/"+hello))
	b.waitText("#trace", "trace "+traceID.String())
	assert.Equal(t, "http://jaeger.example:16686/trace/"+traceID.String(), eval[string](b, "read the trace link", `document.querySelector("#trace a").href`))
	handoff := u.start(map[string]any{"workingDirectory": "ui-handoff", "objective": "Migrate the legacy package [scenario:handoff]"})
	b.run("the list", chromedp.Navigate(u.base+"/ui/#/sessions"))
	b.waitJS("five rows", `document.querySelectorAll("#sessions tbody tr").length === 5`)
	b.waitJS("the chain's first session", fmt.Sprintf(`document.querySelector('tr[data-session=%s]')?.dataset.position === "1"`, jsString(handoff)))
	b.waitText(`tr[data-position="2"] .lineage`, "↳ continues Migrate the legacy package [scenario:handoff] · chain 2/2")
	assert.Equal(t, handoff, eval[string](b, "read the row above the continuation",
		`document.querySelector('tr[data-position="2"]').previousElementSibling.dataset.session`), "a continuation follows the session it continues")
	assert.Equal(t, "chain 1/2", eval[string](b, "read the first session's lineage",
		fmt.Sprintf(`document.querySelector('tr[data-session=%s] .lineage').innerText.trim()`, jsString(handoff))))
	b.choose("#template-filter", templateID)
	b.waitJS("the template's session only", fmt.Sprintf(`(() => { const rows = document.querySelectorAll("#sessions tbody tr"); return rows.length === 1 && rows[0].dataset.session === %s })()`, jsString(id)))
	b.waitText("#sessions tbody tr", "Careful clean-up")
	b.choose("#template-filter", "")
	b.waitJS("five rows again", `document.querySelectorAll("#sessions tbody tr").length === 5`)
	b.run("search", chromedp.SendKeys(chromedp.CSS("#search"), "say hello"))
	b.waitJS("one row", `document.querySelectorAll("#sessions tbody tr").length === 1`)
	b.run("pick it", chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-session=%s] input.pick`, jsString(hello)))))
	b.run("cancel it", chromedp.Click(chromedp.CSS("#cancel-selected")))
	u.waitStatus(hello, "Cancelled")
	b.fill("#search", "")
	b.waitJS("all rows", `document.querySelectorAll("#sessions tbody tr").length === 5`)
	b.screenshot("sessions.png")
}
