package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/uptest"
	"github.com/agentbus/agentbus/internal/webhooktest"
)

// startWebhooksWorker runs `agentbus worker webhooks` as a process of its
// own against up's servers and returns it.
func startWebhooksWorker(t *testing.T, u *upUnderTest) *exec.Cmd {
	t.Helper()
	dbURL := u.args[slices.Index(u.args, "--database-url")+1]
	cmd := exec.Command(os.Args[0], "worker", "webhooks", "--http", "",
		"--database-url", dbURL, "--nats-url", uptest.Credentials(t, u.dataDir)["NATS_URL"], "--redis-url", "")
	cmd.Env = os.Environ()
	log, err := os.Create(fmt.Sprintf("%s/webhooks-worker-%d.log", u.dataDir, time.Now().UnixNano()))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = log.Close()
		if t.Failed() {
			out, _ := os.ReadFile(log.Name())
			t.Logf("the webhooks worker's log:\n%s", out)
		}
	})
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// TestAKilledWebhooksWorkerLosesNoDelivery kills the webhooks worker with
// SIGKILL while its receiver holds a delivery, twice, and starts it again
// each time: every event of the sessions still reaches the receiver, each
// session's in order.
func TestAKilledWebhooksWorkerLosesNoDelivery(t *testing.T) {
	quickWebhooks(t)
	// A killed attempt's delivery is taken again after its lease, the
	// attempt's timeout and five seconds.
	t.Setenv("AGENTBUS_WEBHOOK_TIMEOUT", "2s")
	u := startUpWithRuntime(t, "--without-workers", "webhooks")

	held := make(chan int)
	release := make(chan struct{})
	holds := []int{2, 7}
	rcv := webhooktest.New(t, func(n int) int {
		if slices.Contains(holds, n) {
			held <- n
			<-release
		}
		return http.StatusOK
	})
	var hook struct {
		ID string `json:"id"`
	}
	u.Must(http.MethodPost, "/api/agents/webhooks", map[string]any{"url": rcv.URL}, &hook) // every event
	worker := startWebhooksWorker(t, u)

	var sessions []string
	for i := range 2 {
		sessions = append(sessions, u.start(map[string]any{"workingDirectory": fmt.Sprintf("kill-%d", i),
			"objective": "Pick a database [scenario:question]"}))
	}
	for range holds {
		select {
		case <-held:
		case <-time.After(2 * wait):
			t.Fatal("no delivery reached the receiver")
		}
		require.NoError(t, worker.Process.Signal(syscall.SIGKILL), "kill -9 mid-delivery")
		_ = worker.Wait()
		release <- struct{}{} // the receiver answers a worker that is gone
		worker = startWebhooksWorker(t, u)
	}
	for _, id := range sessions {
		u.waitStatus(id, "WaitingForInput")
		u.Must(http.MethodPost, "/api/agents/sessions/"+id+"/answer", map[string]any{"answer": "PostgreSQL"}, nil)
	}
	for _, id := range sessions {
		u.waitReview(id)
		u.Must(http.MethodPost, "/api/agents/sessions/"+id+"/approve", nil, nil)
		u.waitStatus(id, "Completed")
	}

	// Events may still come after the sessions completed (their release):
	// the receiver's deliveries are compared with the sessions' events on
	// the bus until both hold the same.
	js := u.jetStream()
	var want, got map[string][]string
	total := 0
	same := func() bool {
		want, got, total = map[string][]string{}, map[string][]string{}, 0
		for _, id := range sessions {
			want[id] = sessionEvents(t, js, id, allSessionEvents())
			total += len(want[id])
		}
		for _, g := range rcv.Accepted() {
			p := g.Payload(t)
			got[p.Data.SessionID] = append(got[p.Data.SessionID], g.ID())
		}
		for _, id := range sessions {
			if !slices.Equal(want[id], got[id]) {
				return false
			}
		}
		return true
	}
	assert.Eventually(t, same, 3*wait, 100*time.Millisecond, "every event arrives after the kills")
	for _, id := range sessions {
		assert.Equal(t, want[id], got[id], "session %s: every event once (by webhook-id), in order", id)
	}
	assert.Greater(t, len(rcv.Requests()), total, "the deliveries held at the kills were sent again")
}
