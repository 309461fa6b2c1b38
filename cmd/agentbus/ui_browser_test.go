package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/api"
	"github.com/agentbus/agentbus/internal/webhooktest"
)

// chromiumPath finds the headless browser the dashboard tests drive
// (Debian's chromium, installed by `make deps`).
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser is one headless Chromium tab on the dashboard of an up.
type browser struct {
	t     *testing.T
	ctx   context.Context
	start time.Time
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		t.Skip("chromium is not installed (make deps installs it): the dashboard cannot be driven")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.WindowSize(1280, 1000),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	if os.Geteuid() == 0 {
		// Chromium refuses to run its sandbox as root (a container's user).
		opts = append(opts, chromedp.NoSandbox)
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	require.NoError(t, chromedp.Do(ctx), "start chromium")
	return &browser{t: t, ctx: ctx, start: time.Now()}
}

// run runs actions, each wait within a generous bound for a loaded machine.
func (b *browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	require.NoError(b.t, chromedp.Do(ctx, actions...), what)
	b.t.Logf("%6.1fs %s", time.Since(b.start).Seconds(), what)
}

// waitJS waits until the JavaScript expression is true in the page.
func (b *browser) waitJS(what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(2*time.Minute)))
	require.NoError(b.t, err, "wait for %s", what)
	b.t.Logf("%6.1fs %s", time.Since(b.start).Seconds(), what)
}

// waitText waits until the element of selector contains text.
func (b *browser) waitText(selector, text string) {
	b.t.Helper()
	b.waitJS(fmt.Sprintf("%q in %s", text, selector),
		fmt.Sprintf(`(document.querySelector(%s)?.innerText ?? "").includes(%s)`, jsString(selector), jsString(text)))
}

// eval evaluates a JavaScript expression.
func eval[T any](b *browser, what, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(b.t, err, what)
	return v
}

// choose sets a select's value as a person's choice does.
func (b *browser) choose(selector, value string) {
	b.t.Helper()
	eval[bool](b, "choose "+value, fmt.Sprintf(`(() => { const s = document.querySelector(%s); s.value = %s; s.dispatchEvent(new Event("change", {bubbles: true})); return true })()`,
		jsString(selector), jsString(value)))
}

// clickText clicks the button under scope whose text is text.
func (b *browser) clickText(scope, text string) {
	b.t.Helper()
	b.run("click "+text, chromedp.Click(chromedp.Search(fmt.Sprintf(`%s//button[normalize-space()=%s]`, scope, jsString(text)))))
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// activityEvents are the lines of the session's activity that tell its
// domain events, in order.
func (b *browser) activityEvents() []string {
	b.t.Helper()
	return eval[[]string](b, "read the activity", `[...document.querySelectorAll("#activity .event > .text")].map(e => e.innerText)`)
}

// TestDashboardDrivesASessionThroughTheRealRuntime is a person at the
// dashboard: sign in with a token, start a script-engine session, watch its
// text come in, answer its question, steer it, pause and resume it, promote
// a queued message and approve its output.
func TestDashboardDrivesASessionThroughTheRealRuntime(t *testing.T) {
	if testing.Short() {
		t.Skip("starts up with the real runtime and a browser; skipped with -short")
	}
	u := startUpWithRuntime(t)
	b := newBrowser(t)

	// Sign in by pasting a token.
	b.run("open the dashboard", chromedp.Navigate(u.base+"/ui/"))
	b.run("paste the token", chromedp.WaitVisible(chromedp.CSS("#token")), chromedp.SendKeys(chromedp.CSS("#token"), u.token))
	b.run("sign in", chromedp.Click(chromedp.CSS("#signin")))
	b.waitText("#pool", "Pool ")

	// Start a session from the list page.
	b.run("write the objective",
		chromedp.SendKeys(chromedp.CSS("#objective"), "Move the service to a real database [scenario:walkthrough]"),
		chromedp.SendKeys(chromedp.CSS("#working-directory"), "ui-walkthrough"),
		chromedp.Click(chromedp.CSS("#start")))
	b.waitJS("the session page", `location.hash.startsWith("#/sessions/") && document.querySelector("#session-page") !== null`)
	hash := eval[string](b, "read the session id", `location.hash`)
	id := strings.TrimPrefix(hash, "#/sessions/")
	require.Len(t, id, 36, "the page of the new session: %s", hash)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("session %s on the server: %+v", id, u.Session(id))
			t.Logf("the page: %s", eval[string](b, "read the page", `document.querySelector("#session-page")?.innerText ?? document.body.innerText`))
		}
	})

	// Its text streams in, then its question comes with the options as buttons.
	b.waitText("#activity", "Before I change the storage layer I need one decision from you.")
	b.waitText("#question", "Which database should the service use?")
	b.clickText(`//div[@id="question"]`, "PostgreSQL")
	b.waitText("#activity", "Going with PostgreSQL.")
	// The answer is in the conversation, as the person's, with its time.
	b.waitJS("the answer in the timeline", `[...document.querySelectorAll("#activity .item.user")].some(e =>
		e.querySelector(".prio")?.innerText === "Answer" && e.querySelector(".text")?.innerText === "PostgreSQL" &&
		/^\d\d:\d\d:\d\d$/.test(e.querySelector("time")?.innerText ?? ""))`)
	b.waitText("#activity", "Migrated table 1 of 80.")
	b.waitText("#session-status", "Running")

	// Pause: two phases, the request then the sidecar's confirmation at
	// its next safe point. The turn holds while paused.
	eval[[]string](b, "watch the status badge", `(() => {
		window.statusSeen = [];
		const note = () => { const s = document.querySelector("#session-status")?.innerText; if (s && window.statusSeen.at(-1) !== s) window.statusSeen.push(s); };
		note();
		new MutationObserver(note).observe(document.body, {subtree: true, childList: true, characterData: true});
		return [];
	})()`)
	b.waitJS("pause to be possible", `document.querySelector("#pause")?.disabled === false`)
	b.run("pause", chromedp.Click(chromedp.CSS("#pause")))
	b.waitText("#session-status", "Paused")
	events := b.activityEvents()
	pausing, paused := indexOf(events, "Pausing…"), indexOf(events, "Paused")
	require.NotEqual(t, -1, pausing, "the pause request shows as Pausing…: %v", events)
	assert.Less(t, pausing, paused, "Pausing… then Paused: %v", events)
	assert.Equal(t, "Paused", u.Session(id).Status)
	b.waitText("#waiting", "Waiting for you to resume it · since ")

	// Steer it: an Immediate message cuts in as soon as it runs again.
	b.run("write a steering message", chromedp.SendKeys(chromedp.CSS("#message"), "Keep the old schema readable"))
	b.choose("#priority", "Immediate")
	b.run("send it", chromedp.Click(chromedp.CSS("#send")))
	b.waitText("#queue", "Keep the old schema readable")
	// The person's own message shows in the conversation with its priority,
	// its delivery state and its time.
	b.waitJS("the steering message in the timeline", `[...document.querySelectorAll("#activity .item.user")].some(e =>
		e.querySelector(".text")?.innerText === "Keep the old schema readable" && e.querySelector(".prio")?.innerText === "Immediate" &&
		e.dataset.state === "Pending" && /^\d\d:\d\d:\d\d$/.test(e.querySelector("time")?.innerText ?? ""))`)

	// A Queued message waits for the end of the turn; promoted, it cuts in
	// like steering once the session runs again.
	b.run("write a queued message", chromedp.SendKeys(chromedp.CSS("#message"), "Then write the migration notes"))
	b.choose("#priority", "Queued")
	b.run("queue it", chromedp.Click(chromedp.CSS("#send")))
	b.waitJS("the queued message in the queue", `[...document.querySelectorAll('#queue li[data-priority="Queued"]')].some(li => li.innerText.includes("Then write the migration notes"))`)
	b.run("promote", chromedp.Click(chromedp.CSS(`#queue li[data-priority="Queued"] button.promote`)))
	b.waitText("#activity", "Message promoted to Immediate")

	// Resume: two phases too.
	b.waitJS("resume to be possible", `document.querySelector("#resume")?.disabled === false`)
	b.run("resume", chromedp.Click(chromedp.CSS("#resume")))
	b.waitText("#activity", "Resumed")
	events = b.activityEvents()
	assert.Less(t, indexOf(events, "Resuming…"), indexOf(events, "Resumed"), "Resuming… then Resumed: %v", events)
	// Both cut in once it runs again; the promoted one came last, so the
	// agent's reply to it is the one that is not cut short.
	b.waitJS("both messages delivered", `[...document.querySelectorAll('#activity .item.user[data-state="Delivered"]')].length === 2`)
	b.waitText("#activity", "Understood: Then write the migration notes")
	badge := eval[[]string](b, "read the badge's states", `window.statusSeen`)
	t.Logf("the status badge showed %v", badge)
	assert.Contains(t, badge, "Paused")
	assert.Contains(t, badge, "Running")

	// The output awaits review: approve it.
	b.waitText("#activity", "The storage layer now uses PostgreSQL")
	b.waitText("#session-status", "Idle")
	b.waitText("#review", "Output to review")
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	cancel()
	require.NoError(t, err, "screenshot the session page")
	file := screenshotFile(t, "session-review.png")
	require.NoError(t, os.WriteFile(file, shot, 0o644))
	t.Logf("screenshot of the session page: %s (%d bytes)", file, len(shot))
	b.run("approve", chromedp.Click(chromedp.CSS("#approve")))
	b.waitText("#session-status", "Completed")
	s := u.Session(id)
	assert.Equal(t, "Completed", s.Status)

	// The list shows it, with its cost.
	b.run("back to the list", chromedp.Navigate(u.base+"/ui/#/sessions"))
	b.waitJS("the session's row", fmt.Sprintf(`(document.querySelector('tr[data-session=%s]')?.innerText ?? "").includes("Completed")`, jsString(id)))
}

func indexOf(lines []string, want string) int {
	for i, l := range lines {
		if strings.TrimSpace(l) == want {
			return i
		}
	}
	return -1
}

// screenshotFile is where a screenshot of the dashboard goes: docs/ of
// the checkout, which the README shows, when AGENTBUS_SCREENSHOTS=1, else
// a temporary directory.
func screenshotFile(t *testing.T, name string) string {
	if os.Getenv("AGENTBUS_SCREENSHOTS") == "1" {
		dir := filepath.Join("..", "..", "docs", "screenshots")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		return filepath.Join(dir, name)
	}
	return filepath.Join(t.TempDir(), name)
}

// TestDashboardShowsWebhooks lists a webhook on the Webhooks page, sends
// it a test event and finds the delivery in its log.
func TestDashboardShowsWebhooks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts up and a browser; skipped with -short")
	}
	quickWebhooks(t)
	u := startUpWithRuntime(t)
	rcv := webhooktest.New(t, nil)
	var hook api.WebhookWithSecret
	u.Must(http.MethodPost, "/api/agents/webhooks", map[string]any{"url": rcv.URL + "/dashboard"}, &hook)
	b := newBrowser(t)
	b.run("open the dashboard", chromedp.Navigate(u.base+"/ui/"))
	b.run("paste the token", chromedp.WaitVisible(chromedp.CSS("#token")), chromedp.SendKeys(chromedp.CSS("#token"), u.token))
	b.run("sign in", chromedp.Click(chromedp.CSS("#signin")))
	b.run("open the webhooks", chromedp.Navigate(u.base+"/ui/#/webhooks"))
	b.waitText("#webhooks", rcv.URL+"/dashboard")
	b.run("open the webhook", chromedp.Click(chromedp.CSS(`#webhooks a`)))
	b.run("send a test event", chromedp.WaitVisible(chromedp.CSS("#send-test")), chromedp.Click(chromedp.CSS("#send-test")))
	b.waitJS("the test event delivered", `(document.querySelector("#refresh").click(),
		[...document.querySelectorAll("#deliveries tbody tr")].some(tr => tr.innerText.includes("webhook_test") && tr.innerText.includes("delivered")))`)
	require.Len(t, rcv.Accepted(), 1)
	assert.NoError(t, rcv.Accepted()[0].Verify(hook.Secret))
}
