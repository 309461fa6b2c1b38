package api

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chromium is Debian's chromium, which `make deps` installs.
const chromium = "/usr/bin/chromium"

// TestDocsRenderOffline loads /docs in headless Chromium that can reach
// nothing but this server, and finds the operations listed by the
// renderer. It leaves a screenshot, docs.png, in its temp dir.
func TestDocsRenderOffline(t *testing.T) {
	_, err := os.Stat(chromium)
	require.NoError(t, err, "headless Chromium is needed: make deps installs Debian's chromium")
	srv := httptest.NewServer(newServer(t, Config{}, Deps{}))
	t.Cleanup(srv.Close)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true),
		// No network: every host but the loopback fails to resolve.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelTimeout()

	var mu sync.Mutex
	var requested []string
	err = chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			requested = append(requested, e.Request.URL)
			mu.Unlock()
		}
	})
	require.NoError(t, err, "starting Chromium")

	err = chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/docs"),
		// The sidebar lists the operations by tag, each group folded.
		chromedp.Poll[chromedp.Void](`document.body.innerText.includes("ENDPOINTS") && document.body.innerText.includes("Session control")`,
			chromedp.WithPollingTimeout(90*time.Second)),
		chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll("*")].find(e => e.childElementCount === 0 && e.textContent.trim() === "Sessions").click()`),
		chromedp.Poll[chromedp.Void](`document.body.innerText.includes("Start a session") && document.body.innerText.includes("List your sessions")`,
			chromedp.WithPollingTimeout(30*time.Second)),
	)
	if err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText.slice(0, 1500)`))
		t.Log("the page says:", body)
		mu.Lock()
		t.Log(requested)
		mu.Unlock()
	}
	require.NoError(t, err, "the operations were not rendered")
	sidebar, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
	require.NoError(t, err)
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "docs.png")
	require.NoError(t, os.WriteFile(file, shot, 0o644))
	if dir := os.Getenv("AGENTBUS_SCREENSHOT_DIR"); dir != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "docs.png"), shot, 0o644))
	}
	t.Logf("screenshot: %s", file)

	assert.Contains(t, sidebar, "Get a session", "the group lists every operation of its tag")
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, requested)
	for _, u := range requested {
		assert.True(t, strings.HasPrefix(u, srv.URL+"/") || strings.HasPrefix(u, "data:"), "the page loaded %s from elsewhere", u)
	}
}
