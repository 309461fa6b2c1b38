// Package browsertest drives the dashboard in a headless Chromium (Debian's
// chromium, installed by `make deps`) for tests, each wait within a bound
// generous enough for a loaded machine.
package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// bound is how long one step may take.
const bound = 2 * time.Minute

// Path finds the headless browser, "" when none is installed.
func Path() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Browser is one headless Chromium tab.
type Browser struct {
	T     *testing.T
	Ctx   context.Context
	start time.Time
}

// New starts a browser for the test, or skips it when none is installed.
func New(t *testing.T) *Browser {
	t.Helper()
	path := Path()
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
	return &Browser{T: t, Ctx: ctx, start: time.Now()}
}

// SignIn opens the dashboard at base and signs in with token.
func (b *Browser) SignIn(base, token string) {
	b.T.Helper()
	b.Run("open the dashboard", chromedp.Navigate(base+"/ui/"))
	b.Run("paste the token", chromedp.WaitVisible(chromedp.CSS("#token")), chromedp.SendKeys(chromedp.CSS("#token"), token))
	b.Run("sign in", chromedp.Click(chromedp.CSS("#signin")))
	b.WaitText("#pool", "Pool ")
}

// Run runs actions.
func (b *Browser) Run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.T.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, bound)
	defer cancel()
	require.NoError(b.T, chromedp.Do(ctx, actions...), what)
	b.T.Logf("%6.1fs %s", time.Since(b.start).Seconds(), what)
}

// WaitJS waits until the JavaScript expression is true in the page.
func (b *Browser) WaitJS(what, expr string) {
	b.T.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, bound)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(bound)))
	require.NoError(b.T, err, "wait for %s", what)
	b.T.Logf("%6.1fs %s", time.Since(b.start).Seconds(), what)
}

// WaitText waits until the element of selector contains text.
func (b *Browser) WaitText(selector, text string) {
	b.T.Helper()
	b.WaitJS(fmt.Sprintf("%q in %s", text, selector),
		fmt.Sprintf(`(document.querySelector(%s)?.innerText ?? "").includes(%s)`, JS(selector), JS(text)))
}

// Text returns the inner text of the element of selector, "" when there is
// none.
func (b *Browser) Text(selector string) string {
	b.T.Helper()
	return Eval[string](b, "read "+selector, fmt.Sprintf(`document.querySelector(%s)?.innerText ?? ""`, JS(selector)))
}

// Eval evaluates a JavaScript expression.
func Eval[T any](b *Browser, what, expr string) T {
	b.T.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, bound)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(b.T, err, what)
	return v
}

// Choose sets a select's value as a person's choice does.
func (b *Browser) Choose(selector, value string) {
	b.T.Helper()
	Eval[bool](b, "choose "+value, fmt.Sprintf(`(() => { const s = document.querySelector(%s); s.value = %s; s.dispatchEvent(new Event("change", {bubbles: true})); return true })()`,
		JS(selector), JS(value)))
}

// ClickText clicks the button under the XPath scope whose text is text.
func (b *Browser) ClickText(scope, text string) {
	b.T.Helper()
	b.Run("click "+text, chromedp.Click(chromedp.Search(fmt.Sprintf(`%s//button[normalize-space()=%s]`, scope, JS(text)))))
}

// JS is s as a JavaScript (and XPath) string literal.
func JS(s string) string {
	out, _ := json.Marshal(s)
	return string(out)
}
