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
	return startRunnerAs(t, u, "runner", name, capacity)
}

// startRunnerAs runs `<this binary> command` as a runner process.
func startRunnerAs(t testing.TB, u *upUnderTest, command, name string, capacity int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], command, "--name", name, "--capacity", strconv.Itoa(capacity), "--data-dir", u.dataDir)
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

	killed := time.Now()
	require.NoError(t, procs["runner-a"].Process.Signal(syscall.SIGKILL))
	for _, id := range victims {
		require.Eventually(t, func() bool {
			r := u.placement([]string{id}).runner[id]
			return r == "runner-b" || r == "runner-c"
		}, runners.DefaultLeaseTTL+5*time.Second, 100*time.Millisecond, "session %s not placed on a live runner in time", id)
	}
	seen := time.Since(killed)
	err := stale.Set(context.Background(), probe, "after", 0).Err()
	assert.Error(t, err, "Redis refuses the sidecar of the dead runner")
	u.assertRunnerMetrics(len(ids), len(victims), seen)

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

// agentbus runs `agentbus args... --data-dir <up's>` and returns what it
// printed on its standard output.
func (u *upUnderTest) agentbus(args ...string) []byte {
	u.t.Helper()
	cmd := exec.Command(os.Args[0], append(args, "--data-dir", u.dataDir)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(u.t, err, "agentbus %v: %s", args, stderr.String())
	return out
}

// runners returns the runners `agentbus runners --json` lists, by name.
func (u *upUnderTest) runners() map[string]runnerRow {
	var rows []runnerRow
	require.NoError(u.t, json.Unmarshal(u.agentbus("runners", "--json"), &rows))
	out := map[string]runnerRow{}
	for _, r := range rows {
		out[r.Name] = r
	}
	return out
}

// stopped waits for a runner process to exit after a SIGTERM and returns
// how it exited.
func stopped(t *testing.T, cmd *exec.Cmd) error {
	t.Helper()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(2 * wait):
		t.Fatalf("runner %v did not exit after SIGTERM", cmd.Args)
		return nil
	}
}

// TestADrainedRunnerHandsItsSessionsOverBetweenTurns drains a runner
// process with three sessions, one of them mid-turn (its turn waits on a
// tool's approval): the two between turns move to another runner at
// once, their old sidecars' Redis access fenced off; the one mid-turn
// stays until its turn ends, then moves. Each answers a follow-up on the
// engine's conversation it had. The drained runner then stops at once;
// another one stopped with SIGTERM drains itself before it exits.
func TestADrainedRunnerHandsItsSessionsOverBetweenTurns(t *testing.T) {
	u := startUpWithRuntime(t, "--runner-capacity", "0")
	procs := map[string]*exec.Cmd{"runner-a": startRunner(t, u, "runner-a", 5)}
	idle := []string{u.Start("Tidy the notes", nil), u.Start("Tidy the docs", nil)}
	busy := u.Start("Clean up [scenario:permission]", map[string]any{"toolApproval": map[string]any{"mode": "All", "timeoutSeconds": 600}})
	ids := append([]string{busy}, idle...)
	for _, id := range idle {
		u.waitReview(id)
	}
	bash := u.Permission(busy, "Bash")
	require.Len(t, u.placement(ids).on["runner-a"], 3)
	first := map[string]map[string]any{}
	for _, id := range ids {
		started := u.sidecarsStarted(id)
		require.Len(t, started, 1)
		first[id] = started[0]
	}
	ctx := context.Background()
	stale := u.sidecarRedis("runner-a", idle[0])
	probe := protocol.EventsKey(idle[0]) + ":fence-probe"
	require.NoError(t, stale.Set(ctx, probe, "before", 0).Err(), "the sidecar writes to its session's keys")

	procs["runner-b"] = startRunner(t, u, "runner-b", 5)
	require.Eventually(t, func() bool { _, ok := u.runners()["runner-b"]; return ok }, 2*wait, 100*time.Millisecond, "the runner never took a lease")
	u.agentbus("runners", "drain", "runner-a")
	assert.True(t, u.runners()["runner-a"].Draining, "agentbus runners shows the drain")
	draining, _ := u.scrape().find("agentbus_runner_draining", "runner", "runner-a")
	assert.Equal(t, 1.0, draining.value, "the metrics show the drain")
	require.Eventually(t, func() bool { return len(u.placement(idle).on["runner-b"]) == 2 }, wait, 100*time.Millisecond,
		"the sessions between turns did not move")
	assert.Equal(t, "runner-a", u.placement([]string{busy}).runner[busy], "the session mid-turn stays on its runner")
	assert.Len(t, u.sidecarsStarted(busy), 1, "the session mid-turn keeps its sidecar")
	assert.Error(t, stale.Set(ctx, probe, "after", 0).Err(), "Redis refuses the sidecar left behind")

	u.Post(busy, "permissions/"+bash+"/allow", nil)
	u.Post(busy, "permissions/"+u.Permission(busy, "Write")+"/allow", nil)
	u.waitReview(busy)
	u.waitActivity(busy, "Finished the clean-up.")
	assert.Equal(t, 1, u.Session(busy).Metrics.TurnCount, "the turn ran once, to its end")
	require.Eventually(t, func() bool { return u.placement([]string{busy}).runner[busy] == "runner-b" }, wait, 100*time.Millisecond,
		"the session did not move once its turn ended")
	for _, id := range ids {
		u.FollowUp(id, "What did you do before?", "Queued")
		u.waitActivity(id, "Understood: What did you do before?")
		started := u.sidecarsStarted(id)
		require.Len(t, started, 2, "one sidecar on the drained runner, one after")
		assert.Equal(t, true, started[1]["resumed"], "the second resumes the agent")
		assert.Equal(t, first[id]["engine_session_id"], started[1]["engine_session_id"], "of the same engine session")
	}

	require.NoError(t, stopped(t, procs["runner-a"]), "the drained runner stops cleanly")
	assert.NotContains(t, u.runners(), "runner-a", "its lease is given up")

	// A SIGTERM drains the runner before it exits.
	procs["runner-c"] = startRunner(t, u, "runner-c", 5)
	require.Eventually(t, func() bool { _, ok := u.runners()["runner-c"]; return ok }, 2*wait, 100*time.Millisecond, "the runner never took a lease")
	require.NoError(t, stopped(t, procs["runner-b"]), "the runner drains, then stops cleanly")
	p := u.placement(ids)
	assert.Len(t, p.on["runner-c"], 3, "every session moved before the runner exited")
	u.FollowUp(busy, "And now?", "Queued")
	u.waitActivity(busy, "Understood: And now?")
	started := u.sidecarsStarted(busy)
	require.Len(t, started, 3)
	assert.Equal(t, first[busy]["engine_session_id"], started[2]["engine_session_id"], "the conversation goes on")
}

// assertRunnerMetrics checks /metrics after placed sessions were started
// and moved sessions recovered from a runner's lapse, all within seen
// of the kill: runner-b's capacity, the slots used, the lease ages and
// both histograms.
func (u *upUnderTest) assertRunnerMetrics(placed, moved int, seen time.Duration) {
	t := u.t
	t.Helper()
	m := u.scrape()
	capacity, ok := m.find("agentbus_runner_capacity", "runner", "runner-b")
	require.True(t, ok, "runner-b's capacity is exported")
	assert.Equal(t, 5.0, capacity.value)
	used := 0.0
	for _, r := range []string{"runner-b", "runner-c"} {
		s, ok := m.find("agentbus_runner_sessions", "runner", r)
		require.True(t, ok, "%s's sessions are exported", r)
		assert.LessOrEqual(t, s.value, 5.0)
		used += s.value
		age, ok := m.find("agentbus_runner_lease_age_seconds", "runner", r)
		require.True(t, ok)
		assert.Less(t, age.value, runners.DefaultLeaseTTL.Seconds(), "a live lease is younger than its TTL")
	}
	assert.Positive(t, used)
	count, _ := m.find("agentbus_runner_placement_seconds_count")
	sum, _ := m.find("agentbus_runner_placement_seconds_sum")
	assert.GreaterOrEqual(t, count.value, float64(placed), "every session's first placement is measured")
	assert.Positive(t, sum.value)
	count, _ = m.find("agentbus_runner_recovery_seconds_count")
	sum, _ = m.find("agentbus_runner_recovery_seconds_sum")
	assert.Equal(t, float64(moved), count.value, "each session moved off the dead runner is measured once")
	assert.Positive(t, sum.value)
	assert.LessOrEqual(t, sum.value, float64(moved)*seen.Seconds(), "each recovery lies within what the test saw")
}
