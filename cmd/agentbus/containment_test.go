package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/internal/uptest"
)

// TestAValidationCommandReachesOnlyItsOwnSession runs, as a session's
// CustomCommand validation through up's real runtime, what a hostile
// agent would try: read the server's secrets, other processes'
// environments and another owner's files, write outside its working
// directory, log into Postgres, Redis and NATS without credentials, and
// act through the local socket. Every attempt fails, and nothing it could
// have read shows up in what the owner reads of the session.
func TestAValidationCommandReachesOnlyItsOwnSession(t *testing.T) {
	u := startUpWithRuntime(t)
	canary := "other-owner-canary-" + uuid.NewString()

	// Another owner's session, with a sidecar running and a file of its own.
	otherID, otherFile := u.OtherOwnerSession(runtimeSecret, u.workspace, canary)

	// The secret as `up` keeps it when no AGENTBUS_JWT_SECRET is set.
	require.NoError(t, os.WriteFile(filepath.Join(u.dataDir, jwtSecretFile), []byte(runtimeSecret+"\n"), 0o600))
	pg, err := url.Parse(testenv.PostgresURL(t))
	require.NoError(t, err)
	pgPort, err := strconv.Atoi(pg.Port())
	require.NoError(t, err)
	pgPassword, _ := pg.User.Password()

	probe := uptest.Probe{
		DataDir: u.dataDir, UpPID: os.Getpid(), OtherSidecarPID: u.sidecarPID(otherID), OtherSession: otherID,
		OtherOwnerFile: otherFile,
		Outside: []string{filepath.Join(u.dataDir, "escaped"), filepath.Join(u.workspace, u.owner, "escaped"),
			filepath.Join(u.workspace, "escaped")},
		PostgresPort: pgPort, RedisPort: u.redisPort, NATSPort: u.natsPort,
		Socket: filepath.Join(u.dataDir, socketFile),
	}
	probe.WriteScript(t, filepath.Join(u.workspace, u.owner, "probe"))
	id := u.start(map[string]any{"workingDirectory": "probe", "objective": "Say hello",
		"autoContinue": map[string]any{"isEnabled": true, "maxContinuations": 1,
			"validationCriteria": []any{map[string]any{"type": "CustomCommand", "customCommand": "bash probe.sh; false"}}}})

	// The failed validation continues the session with what it printed.
	var queue struct {
		Messages []struct {
			Content string `json:"content"`
			Status  string `json:"status"`
		} `json:"messages"`
	}
	require.Eventually(t, func() bool {
		u.Must(http.MethodGet, "/api/agents/sessions/"+id+"/messages/queue", nil, &queue)
		return len(queue.Messages) == 1 && queue.Messages[0].Status == "Delivered"
	}, 2*wait, 50*time.Millisecond, "no continuation was delivered: %s", u.Activity(id))
	output := queue.Messages[0].Content
	t.Logf("the probe, as the owner reads it:\n%s", output)
	probe.Check(t, output)

	secrets := []string{runtimeSecret, canary}
	if pgPassword != "" {
		secrets = append(secrets, pgPassword)
	}
	u.WaitFor(id, "Idle once the continuation's turn ended", func(s uptest.Session) bool {
		return s.Status == "Idle" && s.Metrics.TurnCount >= 2
	})
	for _, path := range []string{"", "/messages/queue", "/activity?limit=100", "/messages", "/logs", "/tool-calls", "/metrics"} {
		var raw json.RawMessage
		u.Call(http.MethodGet, "/api/agents/sessions/"+id+path, nil, &raw)
		uptest.NoSecrets(t, "GET "+path, string(raw), secrets...)
	}
}
