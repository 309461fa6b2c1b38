package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/sidecar/launcher"
	"github.com/agentbus/agentbus/sidecar/protocol"
	"github.com/agentbus/agentbus/sidecar/runners"
)

// startRunner runs `agentbus runner` as a process of its own on the data
// directory of up.
func startRunner(t *testing.T, u *upUnderTest, name string, capacity int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "runner", "--name", name, "--capacity", strconv.Itoa(capacity), "--data-dir", u.dataDir)
	cmd.Env = os.Environ()
	log, err := os.Create(fmt.Sprintf("%s/%s.log", u.dataDir, name))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = log.Close()
		if t.Failed() {
			out, _ := os.ReadFile(log.Name())
			t.Logf("the log of %s:\n%s", name, out)
		}
	})
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// placement is where the session details say each session runs.
type placement struct {
	on      map[string][]string // session ids by runner
	runner  map[string]string   // runner by session id
	waiting []string
}

func (u *upUnderTest) placement(ids []string) placement {
	p := placement{on: map[string][]string{}, runner: map[string]string{}}
	for _, id := range ids {
		var s struct {
			Runner           string `json:"runner"`
			WaitingForRunner bool   `json:"waitingForRunner"`
		}
		u.Must(http.MethodGet, "/api/agents/sessions/"+id, nil, &s)
		switch {
		case s.WaitingForRunner:
			p.waiting = append(p.waiting, id)
		case s.Runner != "":
			p.on[s.Runner] = append(p.on[s.Runner], id)
			p.runner[id] = s.Runner
		}
	}
	return p
}

// sidecarsStarted returns the details of the session's "Sidecar started"
// activity items, oldest first.
func (u *upUnderTest) sidecarsStarted(id string) []map[string]any {
	var activity struct {
		Items []struct {
			Summary string `json:"summary"`
			Detail  string `json:"detail"`
		} `json:"items"`
	}
	u.Must(http.MethodGet, "/api/agents/sessions/"+id+"/activity?limit=200", nil, &activity)
	var out []map[string]any
	for _, it := range activity.Items {
		if strings.HasPrefix(it.Summary, "Sidecar started") {
			var d map[string]any
			require.NoError(u.t, json.Unmarshal([]byte(it.Detail), &d))
			out = append(out, d)
		}
	}
	return out
}

// sidecarRedis connects to Redis as the running sidecar of the session on
// runner does: with the URL in its environment.
func (u *upUnderTest) sidecarRedis(runner, id string) *redis.Client {
	t := u.t
	t.Helper()
	raw, err := u.redis.HGet(context.Background(), launcher.RecordsKey(runner), id).Bytes()
	require.NoError(t, err)
	var rec struct {
		PID int `json:"pid"`
	}
	require.NoError(t, json.Unmarshal(raw, &rec))
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", rec.PID))
	require.NoError(t, err)
	for _, kv := range bytes.Split(env, []byte{0}) {
		if v, ok := strings.CutPrefix(string(kv), "REDIS_URL="); ok {
			opts, err := redis.ParseURL(v)
			require.NoError(t, err)
			opts.MaxRetries = -1
			c := redis.NewClient(opts)
			t.Cleanup(func() { _ = c.Close() })
			return c
		}
	}
	t.Fatalf("no REDIS_URL in the environment of the sidecar of %s", id)
	return nil
}

// TestSessionsArePlacedOnRunnersAndMovedOffADeadOne runs up without a
// runner of its own and three runner processes of five sidecars each: 18
// sessions fill the fifteen places and three wait, and start once places
// free. A runner killed with SIGKILL mid-turn has each of its sessions
// resumed on another within the lease's TTL and five seconds, and the
// Redis access of its sidecars is fenced off.
func TestSessionsArePlacedOnRunnersAndMovedOffADeadOne(t *testing.T) {
	u := startUpWithRuntime(t, "--runner-capacity", "0", "--pool-max", "30")
	procs := map[string]*exec.Cmd{}
	for _, name := range []string{"runner-a", "runner-b", "runner-c"} {
		procs[name] = startRunner(t, u, name, 5)
	}
	ids := make([]string, 18)
	for i := range ids {
		ids[i] = u.start(map[string]any{"workingDirectory": fmt.Sprintf("fleet-%d", i), "objective": "Run the suite [scenario:long]"})
	}
	var p placement
	require.Eventually(t, func() bool {
		p = u.placement(ids)
		return len(p.runner) == 15 && len(p.waiting) == 3
	}, 2*wait, 200*time.Millisecond, "15 sessions placed and 3 waiting")
	for name, on := range p.on {
		assert.LessOrEqual(t, len(on), 5, "runner %s", name)
	}
	for id := range p.runner {
		u.waitActivity(id, "integration") // its turn runs on its runner
	}
	waiting := p.waiting

	// Places free: all of runner-c's sessions end, and three of runner-b's.
	ended := append(append([]string{}, p.on["runner-c"]...), p.on["runner-b"][:3]...)
	for _, id := range ended {
		u.Post(id, "cancel", nil)
	}
	for _, id := range ended {
		u.waitStatus(id, "Cancelled")
	}
	for _, id := range waiting {
		u.waitActivity(id, "integration") // a waiting session started once a place freed
	}

	victims := p.on["runner-a"]
	require.Len(t, victims, 5)
	first := map[string]map[string]any{}
	for _, id := range victims {
		started := u.sidecarsStarted(id)
		require.Len(t, started, 1)
		first[id] = started[0]
	}
	stale := u.sidecarRedis("runner-a", victims[0])
	probe := protocol.EventsKey(victims[0]) + ":fence-probe"
	require.NoError(t, stale.Set(context.Background(), probe, "before", 0).Err(), "the sidecar writes to its session's keys")

	require.NoError(t, procs["runner-a"].Process.Signal(syscall.SIGKILL))
	for _, id := range victims {
		require.Eventually(t, func() bool {
			r := u.placement([]string{id}).runner[id]
			return r == "runner-b" || r == "runner-c"
		}, runners.DefaultLeaseTTL+5*time.Second, 100*time.Millisecond, "session %s not placed on a live runner in time", id)
	}
	err := stale.Set(context.Background(), probe, "after", 0).Err()
	assert.Error(t, err, "Redis refuses the sidecar of the dead runner")

	for _, id := range victims {
		u.waitStatus(id, "Idle") // the turn the kill cut short
		u.FollowUp(id, "What did you do before?", "Queued")
		started := u.sidecarsStarted(id)
		require.Len(t, started, 2, "one sidecar on the dead runner, one after")
		assert.Equal(t, true, started[1]["resumed"], "the second resumes the agent")
		assert.Equal(t, first[id]["engine_session_id"], started[1]["engine_session_id"], "of the same engine session")
	}
	p = u.placement(ids)
	for name, on := range p.on {
		assert.LessOrEqual(t, len(on), 5, "runner %s", name)
	}
	assert.Empty(t, p.on["runner-a"])
}
