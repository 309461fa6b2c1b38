package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/browsertest"
)

// TestDashboardCheckpointRailDiffsRewindsAndForks is a person on a
// session's page after three turns of the files scenario: the rail lists
// the three checkpoints with their sizes, compares turns 1 and 3, rewinds
// to turn 2 and forks at turn 1, all through the real runtime.
func TestDashboardCheckpointRailDiffsRewindsAndForks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts up with the real runtime and a browser; skipped with -short")
	}
	u := startUpWithRuntime(t)
	dir := filepath.Join(u.workspace, u.owner, "project-"+uuid.NewString()[:8])
	id := u.start(map[string]any{"workingDirectory": dir, "objective": "Build the project [scenario:files]"})
	u.waitReview(id)
	u.waitFiles(dir, filesAfterTurn[3], "after three turns")

	b := newBrowser(t)
	b.SignIn(u.base, u.token)
	b.Run("open the session", chromedp.Navigate(u.base+"/ui/#/sessions/"+id))
	b.WaitJS("three checkpoints in the rail", `document.querySelectorAll("#checkpoints li").length === 3`)
	b.WaitText("#checkpoints-storage", "3 of 3 kept · store ")
	assert.Contains(t, b.Text(`#checkpoints li[data-turn="3"]`), "Replaced main (turn three).")

	b.Choose("#diff-from", "1")
	b.Choose("#diff-to", "3")
	b.Run("compare turns 1 and 3", chromedp.Click(chromedp.CSS("#diff-compare")))
	b.WaitText("#checkpoint-diff", "+turn three")
	diff := b.Text("#checkpoint-diff")
	for _, want := range []string{"changed README.md", "added cmd/app.go", "added pkg/util.go", "removed src/main.go", "-turn one"} {
		assert.Contains(t, diff, want)
	}

	b.Run("rewind to turn 2", chromedp.Click(chromedp.CSS(`#checkpoints li[data-turn="2"] .rewind-here`)))
	u.waitFiles(dir, filesAfterTurn[2], "after the rewind from the dashboard")
	b.WaitJS("the restored state in the rail", `document.querySelectorAll("#checkpoints li").length === 4`)
	b.WaitText(`#checkpoints li[data-turn="3"]`, "rewound")

	b.Run("fork at turn 1", chromedp.Click(chromedp.CSS(`#checkpoints li[data-turn="1"] .fork-here`)))
	b.WaitJS("the fork's page", `location.hash.startsWith("#/sessions/") && !location.hash.endsWith(`+browsertest.JS(id)+`)`)
	fork := strings.TrimPrefix(browsertest.Eval[string](b.Browser, "read the fork's id", `location.hash`), "#/sessions/")
	require.Len(t, fork, 36)
	u.waitStatus(fork, "Idle")
	var s sessionWithDir
	u.Must(http.MethodGet, "/api/agents/sessions/"+fork, nil, &s)
	require.NotNil(t, s.ForkedFrom)
	assert.Equal(t, 1, s.ForkedFrom.Checkpoint)
	u.waitFiles(s.WorkingDirectory, filesAfterTurn[1], "the fork holds turn 1's files")
}
