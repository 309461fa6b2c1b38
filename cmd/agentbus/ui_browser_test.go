package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/api"
	"github.com/agentbus/agentbus/internal/browsertest"
	"github.com/agentbus/agentbus/internal/webhooktest"
)

// browser is one headless Chromium tab on the dashboard of an up.
type browser struct{ *browsertest.Browser }

func newBrowser(t *testing.T) *browser { return &browser{browsertest.New(t)} }

// activityEvents are the lines of the session's activity that tell its
// domain events, in order.
func (b *browser) activityEvents() []string {
	b.T.Helper()
	return browsertest.Eval[[]string](b.Browser, "read the activity", `[...document.querySelectorAll("#activity .event > .text")].map(e => e.innerText)`)
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
	b.Run("open the dashboard", chromedp.Navigate(u.base+"/ui/"))
	b.Run("paste the token", chromedp.WaitVisible(chromedp.CSS("#token")), chromedp.SendKeys(chromedp.CSS("#token"), u.token))
	b.Run("sign in", chromedp.Click(chromedp.CSS("#signin")))
	b.WaitText("#pool", "Pool ")

	// Start a session from the list page.
	b.Run("write the objective",
		chromedp.SendKeys(chromedp.CSS("#objective"), "Move the service to a real database [scenario:walkthrough]"),
		chromedp.SendKeys(chromedp.CSS("#working-directory"), "ui-walkthrough"),
		chromedp.Click(chromedp.CSS("#start")))
	b.WaitJS("the session page", `location.hash.startsWith("#/sessions/") && document.querySelector("#session-page") !== null`)
	hash := browsertest.Eval[string](b.Browser, "read the session id", `location.hash`)
	id := strings.TrimPrefix(hash, "#/sessions/")
	require.Len(t, id, 36, "the page of the new session: %s", hash)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("session %s on the server: %+v", id, u.Session(id))
			t.Logf("the page: %s", browsertest.Eval[string](b.Browser, "read the page", `document.querySelector("#session-page")?.innerText ?? document.body.innerText`))
		}
	})

	// Its text streams in, then its question comes with the options as buttons.
	b.WaitText("#activity", "Before I change the storage layer I need one decision from you.")
	b.WaitText("#question", "Which database should the service use?")
	b.ClickText(`//div[@id="question"]`, "PostgreSQL")
	b.WaitText("#activity", "Going with PostgreSQL.")
	// The answer is in the conversation, as the person's, with its time.
	b.WaitJS("the answer in the timeline", `[...document.querySelectorAll("#activity .item.user")].some(e =>
		e.querySelector(".prio")?.innerText === "Answer" && e.querySelector(".text")?.innerText === "PostgreSQL" &&
		/^\d\d:\d\d:\d\d$/.test(e.querySelector("time")?.innerText ?? ""))`)
	b.WaitText("#activity", "Migrated table 1 of 80.")
	b.WaitText("#session-status", "Running")
	// The page names the runner whose host runs the session's agent.
	runner := u.Session(id).Runner
	require.NotEmpty(t, runner, "a running session has its runner")
	b.WaitText("#runner", "runs on runner "+runner)

	// Pause: two phases, the request then the sidecar's confirmation at
	// its next safe point. The turn holds while paused.
	browsertest.Eval[[]string](b.Browser, "watch the status badge", `(() => {
		window.statusSeen = [];
		const note = () => { const s = document.querySelector("#session-status")?.innerText; if (s && window.statusSeen.at(-1) !== s) window.statusSeen.push(s); };
		note();
		new MutationObserver(note).observe(document.body, {subtree: true, childList: true, characterData: true});
		return [];
	})()`)
	b.WaitJS("pause to be possible", `document.querySelector("#pause")?.disabled === false`)
	b.Run("pause", chromedp.Click(chromedp.CSS("#pause")))
	b.WaitText("#session-status", "Paused")
	events := b.activityEvents()
	pausing, paused := indexOf(events, "Pausing…"), indexOf(events, "Paused")
	require.NotEqual(t, -1, pausing, "the pause request shows as Pausing…: %v", events)
	assert.Less(t, pausing, paused, "Pausing… then Paused: %v", events)
	assert.Equal(t, "Paused", u.Session(id).Status)
	b.WaitText("#waiting", "Waiting for you to resume it · since ")

	// Steer it: an Immediate message cuts in as soon as it runs again.
	b.Run("write a steering message", chromedp.SendKeys(chromedp.CSS("#message"), "Keep the old schema readable"))
	b.Choose("#priority", "Immediate")
	b.Run("send it", chromedp.Click(chromedp.CSS("#send")))
	b.WaitText("#queue", "Keep the old schema readable")
	// The person's own message shows in the conversation with its priority,
	// its delivery state and its time.
	b.WaitJS("the steering message in the timeline", `[...document.querySelectorAll("#activity .item.user")].some(e =>
		e.querySelector(".text")?.innerText === "Keep the old schema readable" && e.querySelector(".prio")?.innerText === "Immediate" &&
		e.dataset.state === "Pending" && /^\d\d:\d\d:\d\d$/.test(e.querySelector("time")?.innerText ?? ""))`)

	// A Queued message waits for the end of the turn; promoted, it cuts in
	// like steering once the session runs again.
	b.Run("write a queued message", chromedp.SendKeys(chromedp.CSS("#message"), "Then write the migration notes"))
	b.Choose("#priority", "Queued")
	b.Run("queue it", chromedp.Click(chromedp.CSS("#send")))
	b.WaitJS("the queued message in the queue", `[...document.querySelectorAll('#queue li[data-priority="Queued"]')].some(li => li.innerText.includes("Then write the migration notes"))`)
	b.Run("promote", chromedp.Click(chromedp.CSS(`#queue li[data-priority="Queued"] button.promote`)))
	b.WaitText("#activity", "Message promoted to Immediate")

	// Resume: two phases too.
	b.WaitJS("resume to be possible", `document.querySelector("#resume")?.disabled === false`)
	b.Run("resume", chromedp.Click(chromedp.CSS("#resume")))
	b.WaitText("#activity", "Resumed")
	events = b.activityEvents()
	assert.Less(t, indexOf(events, "Resuming…"), indexOf(events, "Resumed"), "Resuming… then Resumed: %v", events)
	// Both cut in once it runs again; the promoted one came last, so the
	// agent's reply to it is the one that is not cut short.
	b.WaitJS("both messages delivered", `[...document.querySelectorAll('#activity .item.user[data-state="Delivered"]')].length === 2`)
	b.WaitText("#activity", "Understood: Then write the migration notes")
	badge := browsertest.Eval[[]string](b.Browser, "read the badge's states", `window.statusSeen`)
	t.Logf("the status badge showed %v", badge)
	assert.Contains(t, badge, "Paused")
	assert.Contains(t, badge, "Running")

	// The output awaits review: approve it.
	b.WaitText("#activity", "The storage layer now uses PostgreSQL")
	b.WaitText("#session-status", "Idle")
	b.WaitText("#review", "Output to review")
	ctx, cancel := context.WithTimeout(b.Ctx, 2*time.Minute)
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	cancel()
	require.NoError(t, err, "screenshot the session page")
	file := screenshotFile(t, "session-review.png")
	require.NoError(t, os.WriteFile(file, shot, 0o644))
	t.Logf("screenshot of the session page: %s (%d bytes)", file, len(shot))
	b.Run("approve", chromedp.Click(chromedp.CSS("#approve")))
	b.WaitText("#session-status", "Completed")
	s := u.Session(id)
	assert.Equal(t, "Completed", s.Status)

	// The list shows it, with its cost.
	b.Run("back to the list", chromedp.Navigate(u.base+"/ui/#/sessions"))
	b.WaitJS("the session's row", fmt.Sprintf(`(document.querySelector('tr[data-session=%s]')?.innerText ?? "").includes("Completed")`, browsertest.JS(id)))
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
	b.Run("open the dashboard", chromedp.Navigate(u.base+"/ui/"))
	b.Run("paste the token", chromedp.WaitVisible(chromedp.CSS("#token")), chromedp.SendKeys(chromedp.CSS("#token"), u.token))
	b.Run("sign in", chromedp.Click(chromedp.CSS("#signin")))
	b.Run("open the webhooks", chromedp.Navigate(u.base+"/ui/#/webhooks"))
	b.WaitText("#webhooks", rcv.URL+"/dashboard")
	b.Run("open the webhook", chromedp.Click(chromedp.CSS(`#webhooks a`)))
	b.Run("send a test event", chromedp.WaitVisible(chromedp.CSS("#send-test")), chromedp.Click(chromedp.CSS("#send-test")))
	b.WaitJS("the test event delivered", `(document.querySelector("#refresh").click(),
		[...document.querySelectorAll("#deliveries tbody tr")].some(tr => tr.innerText.includes("webhook_test") && tr.innerText.includes("delivered")))`)
	require.Len(t, rcv.Accepted(), 1)
	assert.NoError(t, rcv.Accepted()[0].Verify(hook.Secret))
}
