package claude_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/internal/uptest"
)

// TestClaudeBashReachesOnlyItsOwnSessionThroughUp has the real CLI, told
// by the scripted model, run what a hostile agent would try as its own
// Bash tool call, through `agentbus up` as a user starts it: read the
// server's secrets, other processes' environments and another owner's
// files, write outside its working directory, log into Postgres, Redis and
// NATS without credentials, and act through the local socket. Every
// attempt fails, and nothing it could have read reaches the owner.
func TestClaudeBashReachesOnlyItsOwnSessionThroughUp(t *testing.T) {
	var (
		mu     sync.Mutex
		output string
	)
	w := newWorld(t,
		reply{match: userSaid("Say hello."), blocks: []block{text("Hello.")}},
		reply{match: userSaid("Look around the machine."), blocks: []block{toolUse("toolu_probe", "Bash", bash("bash probe.sh"))}},
		reply{
			match: func(r modelRequest) error {
				res, ok := r.toolResult("toolu_probe")
				if !ok {
					return fmt.Errorf("no tool_result for the probe")
				}
				mu.Lock()
				output = res.Text
				mu.Unlock()
				return nil
			},
			blocks: []block{text("Looked around.")},
		},
	)
	u := startUp(t, w)
	canary := "other-owner-canary-" + uuid.NewString()
	// The secret as `up` keeps it when no AGENTBUS_JWT_SECRET is set.
	require.NoError(t, os.WriteFile(filepath.Join(u.dataDir, "jwt-secret"), []byte(upSecret+"\n"), 0o600))
	workspace := filepath.Join(u.dataDir, "workspace")

	// Another owner's session, with a sidecar running and a file of its own.
	otherID, otherFile := u.OtherOwnerSession(upSecret, workspace, canary)
	var otherPID int
	require.Eventually(t, func() bool { otherPID = u.sidecarPID(otherID); return otherPID != 0 }, wait, 50*time.Millisecond)

	pg, err := url.Parse(testenv.PostgresURL(t))
	require.NoError(t, err)
	pgPort, err := strconv.Atoi(pg.Port())
	require.NoError(t, err)
	probe := uptest.Probe{
		DataDir: u.dataDir, UpPID: u.cmd.Process.Pid, OtherSidecarPID: otherPID, OtherSession: otherID,
		OtherOwnerFile: otherFile,
		Outside: []string{filepath.Join(u.dataDir, "escaped"), filepath.Join(workspace, u.owner, "escaped"),
			filepath.Join(workspace, "escaped")},
		PostgresPort: pgPort, RedisPort: u.redisPort, NATSPort: u.natsPort,
		Socket: filepath.Join(u.dataDir, "agent.sock"),
	}
	probe.WriteScript(t, filepath.Join(workspace, u.owner, "probe"))
	var started struct {
		Session uptest.Session `json:"session"`
	}
	u.Must(http.MethodPost, "/api/agents/sessions", map[string]any{"workingDirectory": "probe",
		"objective": "Look around the machine.", "budgetCapUsd": 5}, &started)
	id := started.Session.ID
	u.reviewAfter(id, 0)
	require.Zero(t, w.model.remaining(), "the model answered every scripted turn")

	mu.Lock()
	got := output
	mu.Unlock()
	t.Logf("the probe, as the agent saw it:\n%s", got)
	probe.Check(t, got)

	secrets := []string{upSecret, canary}
	if password, ok := pg.User.Password(); ok && password != "" {
		secrets = append(secrets, password)
	}
	for _, path := range []string{"", "/activity?limit=100", "/messages", "/logs", "/tool-calls", "/metrics"} {
		var raw json.RawMessage
		u.Call(http.MethodGet, "/api/agents/sessions/"+id+path, nil, &raw)
		uptest.NoSecrets(t, "GET "+path, string(raw), secrets...)
	}
	u.stop()
}
