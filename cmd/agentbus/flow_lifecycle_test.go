package main

import (
	"encoding/json"
	"fmt"
	"os"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"

	"github.com/agentbus/agentbus/internal/uptest"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// TestARetryRightAfterARejectRunsAgain rejects a session's output and
// retries it at once, before the rejected run's release reached the
// runtime: the late release must not keep the rejected run's sidecar, and
// the retried run must start a sidecar of its own and deliver its output.
// Several sessions at once make the race likely.
func TestARetryRightAfterARejectRunsAgain(t *testing.T) {
	u := startUpWithRuntime(t)
	for i := range 4 {
		t.Run(fmt.Sprint("session ", i), func(t *testing.T) {
			t.Parallel()
			c := *u.Client
			c.T = t
			dir := filepath.Join(u.workspace, u.owner, uuid.NewString()[:8])
			id := u.start(map[string]any{"workingDirectory": dir, "objective": "Review me [scenario:default]"})
			first := c.WaitFor(id, "Idle awaiting review", func(s uptest.Session) bool { return s.Status == "Idle" && s.HasPendingReview })
			firstPID := c.SidecarPIDs()[id]
			c.Must(http.MethodPost, "/api/agents/sessions/"+id+"/reject", map[string]any{"reason": "not good"}, nil)
			c.Must(http.MethodPost, "/api/agents/sessions/"+id+"/retry", map[string]any{"additionalInstruction": "again, better"}, nil)
			turns := 2 * first.Metrics.TurnCount
			s := c.WaitFor(id, "Idle with the retried run's output", func(s uptest.Session) bool {
				return s.Status == "Idle" && s.HasPendingReview && s.Metrics.TurnCount >= turns
			})
			assert.Equal(t, turns, s.Metrics.TurnCount, "the retried run took as many turns as the first")
			assert.True(t, processGone(firstPID), "the rejected run's sidecar (pid %d) is gone", firstPID)
			second := c.SidecarPIDs()[id]
			assert.NotZero(t, second, "the retried run has a sidecar")
			assert.NotEqual(t, firstPID, second, "the retried run has a sidecar of its own")
			// The retried run's agent is told the retry's instruction.
			raw, err := os.ReadFile(filepath.Join(u.dataDir, "sidecars", id+".json"))
			if assert.NoError(t, err, "the running sidecar's config") {
				var cfg protocol.Config
				assert.NoError(t, json.Unmarshal(raw, &cfg))
				assert.Equal(t, 1, cfg.Attempt)
				assert.Contains(t, cfg.Objective, "again, better")
			}
			c.Must(http.MethodPost, "/api/agents/sessions/"+id+"/approve", nil, nil)
			c.WaitFor(id, "Completed", func(s uptest.Session) bool { return s.Status == "Completed" })
		})
	}
}
