package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/api"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/internal/uptest"
)

// upUnderTest is `agentbus up` running in the test process with its real
// runtime: each session's sidecar is a process of this binary (TestMain
// runs it as `agentbus sidecar`), driving the script engine.
type upUnderTest struct {
	*uptest.Client
	t         testing.TB
	args      []string
	base      string
	token     string
	owner     string
	workspace string
	redis     *redis.Client
	stop      func()
	// dataDir is up's data directory; natsPort and redisPort the ports of
	// its embedded NATS and private Redis.
	dataDir             string
	natsPort, redisPort int
}

const runtimeSecret = "runtime-test-secret"

func startUpWithRuntime(t testing.TB, extraArgs ...string) *upUnderTest {
	t.Helper()
	dataDir, err := testenv.TempDir("runtime")
	require.NoError(t, err)
	t.Setenv("AGENTBUS_JWT_SECRET", runtimeSecret)
	t.Setenv("AGENTBUS_RUNTIME", "process")
	t.Setenv("AGENTBUS_ENGINE", "")
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	redisPort, natsPort := freePort(t), freePort(t)
	u := &upUnderTest{t: t, base: "http://" + httpAddr, owner: uuid.NewString(), workspace: filepath.Join(dataDir, "workspace"),
		dataDir: dataDir, natsPort: natsPort, redisPort: redisPort,
		args: append([]string{"--data-dir", dataDir, "--http", httpAddr,
			"--nats-port", fmt.Sprint(natsPort), "--nats-monitor-port", "0",
			"--database-url", testenv.PostgresURL(t), "--redis-port", fmt.Sprint(redisPort), "--redis-url", "", "--nats-url", ""},
			extraArgs...)}
	u.launch()
	u.token, err = api.NewToken(runtimeSecret, u.owner, time.Hour)
	require.NoError(t, err)
	u.redis = uptest.RedisOf(t, dataDir, 0)
	u.Client = &uptest.Client{T: t, Base: u.base, Token: u.token, Redis: u.redis, Wait: 2 * wait}
	return u
}

// launch runs up until stop is called or the test ends.
func (u *upUnderTest) launch() {
	t := u.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runUp(ctx, u.args) }()
	stopped := false
	u.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(2 * wait):
			t.Error("up did not stop")
		}
	}
	stop := u.stop
	t.Cleanup(stop)
	require.Eventually(t, func() bool {
		resp, err := http.Get(u.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 90*time.Second, 100*time.Millisecond, "up did not become ready")
}

func (u *upUnderTest) start(body map[string]any) string {
	u.t.Helper()
	if _, ok := body["budgetCapUsd"]; !ok && body["templateId"] == nil {
		body["budgetCapUsd"] = 5
	}
	var out struct {
		Session uptest.Session `json:"session"`
	}
	u.Must(http.MethodPost, "/api/agents/sessions", body, &out)
	require.NotEmpty(u.t, out.Session.ID)
	return out.Session.ID
}

func (u *upUnderTest) waitStatus(id string, status string) uptest.Session {
	u.t.Helper()
	return u.WaitFor(id, status, func(s uptest.Session) bool { return s.Status == status })
}

func (u *upUnderTest) waitReview(id string) {
	u.t.Helper()
	u.WaitFor(id, "Idle awaiting review", func(s uptest.Session) bool { return s.Status == "Idle" && s.HasPendingReview })
}

// waitActivity waits until the session's activity mentions text.
func (u *upUnderTest) waitActivity(id, text string) {
	u.t.Helper()
	require.Eventually(u.t, func() bool { return strings.Contains(u.Activity(id), text) }, 2*wait, 50*time.Millisecond,
		"the activity of %s never mentioned %q", id, text)
}

func (u *upUnderTest) sidecarPID(id string) int {
	u.t.Helper()
	var pid int
	require.Eventually(u.t, func() bool {
		pid = u.SidecarPIDs()[id]
		return pid != 0
	}, 2*wait, 20*time.Millisecond, "no sidecar runs session %s", id)
	return pid
}

func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return true
	}
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err != nil || strings.Contains(string(raw), ") Z ")
}

func (u *upUnderTest) waitGone(pid int) {
	u.t.Helper()
	require.Eventually(u.t, func() bool { return processGone(pid) }, 2*wait, 20*time.Millisecond, "sidecar process %d is still there", pid)
}

// TestRuntimeKeepsTheSessionAcrossTurns drives the flows of a session
// between and around its turns through `up` and its real runtime.
func TestRuntimeKeepsTheSessionAcrossTurns(t *testing.T) {
	u := startUpWithRuntime(t)
	dir := func() string { return filepath.Join(u.workspace, u.owner, uuid.NewString()[:8]) }

	t.Run("follow-ups to an Idle session reach the agent", func(t *testing.T) {
		id := u.start(map[string]any{"workingDirectory": dir(), "objective": "Say hello"})
		u.waitReview(id)
		pid := u.sidecarPID(id)

		u.FollowUp(id, "Now say goodbye", "Immediate")
		u.FollowUp(id, "And once more, queued", "Queued")
		assert.Equal(t, pid, u.sidecarPID(id), "one sidecar served every turn")

		u.Must(http.MethodPost, "/api/agents/sessions/"+id+"/approve", nil, nil)
		u.waitStatus(id, "Completed")
		u.waitGone(pid)
	})

	t.Run("a queued follow-up posted mid-turn is delivered after the turn", func(t *testing.T) {
		id := u.start(map[string]any{"workingDirectory": dir(), "objective": "Pick a database [scenario:question]"})
		u.waitStatus(id, "WaitingForInput")
		m := u.Enqueue(id, "Then write the migration", "Queued")
		u.Must(http.MethodPost, "/api/agents/sessions/"+id+"/answer", map[string]any{"answer": "PostgreSQL"}, nil)
		u.WaitDelivered(id, m)
		u.waitReview(id)
	})

	t.Run("cancel on Idle ends the session and its sidecar", func(t *testing.T) {
		id := u.start(map[string]any{"workingDirectory": dir(), "objective": "Say hello"})
		u.waitReview(id)
		pid := u.sidecarPID(id)
		u.Must(http.MethodPost, "/api/agents/sessions/"+id+"/cancel", nil, nil)
		u.waitStatus(id, "Cancelled")
		u.waitGone(pid)
	})

	t.Run("a pause that times out fails the session and stops its sidecar", func(t *testing.T) {
		var tmpl struct {
			ID string `json:"id"`
		}
		u.Must(http.MethodPost, "/api/agents/templates", map[string]any{
			"name": "short pause", "modelId": "claude-sonnet-4-5", "allowedTools": []string{"Bash", "Read", "TodoWrite", "Task"},
			"defaultBudgetCapUsd": 5, "timeouts": map[string]any{"pauseSeconds": 1},
		}, &tmpl)
		id := u.start(map[string]any{"workingDirectory": dir(), "objective": "Run the suite [scenario:long]", "templateId": tmpl.ID})
		u.waitStatus(id, "Running")
		pid := u.sidecarPID(id)
		u.Must(http.MethodPost, "/api/agents/sessions/"+id+"/pause", nil, nil)
		u.waitStatus(id, "Failed")
		u.waitGone(pid)
	})

	t.Run("a retried session runs again", func(t *testing.T) {
		id := u.start(map[string]any{"workingDirectory": dir(), "objective": "Break [scenario:fail]"})
		u.waitStatus(id, "Failed")
		u.Must(http.MethodPost, "/api/agents/sessions/"+id+"/retry", map[string]any{"additionalInstruction": "Try again"}, nil)
		u.WaitFor(id, "running again", func(s uptest.Session) bool { return s.Status != "Queued" && s.Status != "Failed" })
	})

	t.Run("stopping up leaves no sidecar behind", func(t *testing.T) {
		running := u.start(map[string]any{"workingDirectory": dir(), "objective": "Run the suite [scenario:long]"})
		idle := u.start(map[string]any{"workingDirectory": dir(), "objective": "Say hello"})
		u.waitStatus(running, "Running")
		u.waitReview(idle)
		pids := u.SidecarPIDs()
		require.NotEmpty(t, pids)
		u.stop()
		for id, pid := range pids {
			assert.True(t, processGone(pid), "the sidecar of %s (pid %d) is still there", id, pid)
		}
	})
}

// TestSessionsAreConfinedAndSeeNoServerSecret runs, through up and its
// real runtime, a validation command that prints its environment, and
// reads back everything its owner can read; and starts sessions outside
// the owner's part of the workspace.
func TestSessionsAreConfinedAndSeeNoServerSecret(t *testing.T) {
	u := startUpWithRuntime(t)
	assert.Equal(t, "on", u.readyz()["sandbox"], "/readyz shows that the sidecars are confined")
	// A file of the server's data directory and another owner's code: the
	// session's sandbox holds neither.
	dataDir := filepath.Dir(u.workspace)
	require.NoError(t, os.WriteFile(filepath.Join(dataDir, "server-only"), []byte("SERVER-ONLY-CONTENT"), 0o600))
	other := filepath.Join(u.workspace, uuid.NewString(), "src")
	require.NoError(t, os.MkdirAll(other, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(other, "OTHER-OWNERS-FILE"), []byte("x"), 0o644))
	secrets := []string{runtimeSecret, "AGENTBUS_JWT_SECRET", "DATABASE_URL", "REDIS_URL", "AGENTBUS_SESSION_KEY",
		"SERVER-ONLY-CONTENT", "OTHER-OWNERS-FILE"}
	probe := `env; echo "--- the validation ran in $(pwd)"; cat ../../../server-only ` + filepath.Join(dataDir, "server-only") +
		`; ls ../../* ` + other + `; echo "--- processes: $(ls -d /proc/[0-9]* | wc -l)"; false`
	id := u.start(map[string]any{"workingDirectory": "exfiltration", "objective": "Say hello",
		"autoContinue": map[string]any{"isEnabled": true, "maxContinuations": 1,
			"validationCriteria": []any{map[string]any{"type": "CustomCommand", "customCommand": probe}}}})

	// The first validation fails and continues the session once with what
	// it printed; the second one finds no continuation left.
	var queue struct {
		Messages []struct {
			Content string `json:"content"`
			Source  string `json:"source"`
			Status  string `json:"status"`
		} `json:"messages"`
	}
	require.Eventually(t, func() bool {
		u.Must(http.MethodGet, "/api/agents/sessions/"+id+"/messages/queue", nil, &queue)
		return len(queue.Messages) == 1 && queue.Messages[0].Status == "Delivered"
	}, 2*wait, 50*time.Millisecond, "no continuation was delivered")
	continuation := queue.Messages[0].Content
	assert.Equal(t, "System", queue.Messages[0].Source)
	assert.Contains(t, continuation, "Validation failed: CustomCommand")
	assert.Contains(t, continuation, "PATH=", "the command's output reaches the agent")
	for _, secret := range secrets {
		assert.NotContains(t, continuation, secret, "the validation command saw a server secret")
	}
	assert.Contains(t, continuation, "--- the validation ran in "+filepath.Join(u.workspace, u.owner, "exfiltration"))
	var procs int
	_, err := fmt.Sscanf(continuation[strings.LastIndex(continuation, "--- processes: "):], "--- processes: %d", &procs)
	require.NoError(t, err, continuation)
	assert.LessOrEqual(t, procs, 10, "the validation command sees only its sandbox's processes")
	u.waitActivity(id, "Validation: 1 of 1 checks failed")
	// The continuation's turn is validated too; its failure finds the loop
	// spent, which leaves the session Idle for its owner, not awaiting review.
	u.WaitFor(id, "Idle without review once the loop is spent", func(s uptest.Session) bool {
		return s.Status == "Idle" && !s.HasPendingReview && s.Metrics.TurnCount >= 2
	})
	// The scenario's own first turn may be validated as well, when its
	// result comes while the session is still Idle between the two.
	require.Eventually(t, func() bool { return strings.Count(u.Activity(id), "Validation: 1 of 1 checks failed") >= 2 },
		2*wait, 50*time.Millisecond, "the continuation's turn was validated too: %s", u.Activity(id))

	readable := []string{"", "/messages/queue", "/activity?limit=100", "/messages", "/logs", "/tool-calls", "/metrics"}
	for _, path := range readable {
		var raw json.RawMessage
		u.Call(http.MethodGet, "/api/agents/sessions/"+id+path, nil, &raw)
		for _, secret := range secrets {
			assert.NotContains(t, string(raw), secret, "GET %s shows its owner a server secret", path)
		}
	}

	t.Run("a working directory outside the owner's part of the workspace is refused", func(t *testing.T) {
		other := uuid.NewString()
		require.NoError(t, os.MkdirAll(filepath.Join(u.workspace, other, "src"), 0o755))
		home := filepath.Join(u.workspace, u.owner)
		require.NoError(t, os.MkdirAll(home, 0o755))
		require.NoError(t, os.Symlink("/", filepath.Join(home, "escape")))
		for _, dir := range []string{"/", "/tmp", u.workspace, filepath.Join(u.workspace, other, "src"), "../" + other, "escape", "escape/etc"} {
			var problem struct {
				Errors []struct {
					Location string `json:"location"`
				} `json:"errors"`
			}
			code := u.Call(http.MethodPost, "/api/agents/sessions", map[string]any{"workingDirectory": dir, "objective": "x", "budgetCapUsd": 1}, &problem)
			require.Equal(t, http.StatusUnprocessableEntity, code, dir)
			require.NotEmpty(t, problem.Errors, dir)
			assert.Equal(t, "body.workingDirectory", problem.Errors[0].Location, dir)
		}
	})
}

// TestAFollowUpAfterARestartOfUpReachesTheResumedAgent stops up while a
// session waits Idle and starts it again on the same data.
func TestAFollowUpAfterARestartOfUpReachesTheResumedAgent(t *testing.T) {
	u := startUpWithRuntime(t)
	id := u.start(map[string]any{"workingDirectory": "restart", "objective": "Say hello"})
	u.waitReview(id)
	pid := u.sidecarPID(id)
	u.stop()
	assert.True(t, processGone(pid), "up stopped the sidecar")

	u.launch()
	require.Eventually(t, func() bool {
		p := u.SidecarPIDs()[id]
		return p != 0 && p != pid
	}, 2*wait, 20*time.Millisecond, "the sidecar was not started again")
	u.FollowUp(id, "What did you do before?", "Queued")

	var activity struct {
		Items []struct {
			Summary string `json:"summary"`
			Detail  string `json:"detail"`
		} `json:"items"`
	}
	u.Must(http.MethodGet, "/api/agents/sessions/"+id+"/activity?limit=100", nil, &activity)
	var started []map[string]any
	for _, it := range activity.Items {
		if strings.HasPrefix(it.Summary, "Sidecar started") {
			var d map[string]any
			require.NoError(t, json.Unmarshal([]byte(it.Detail), &d))
			started = append(started, d)
		}
	}
	require.Len(t, started, 2, "one sidecar before the restart, one after")
	assert.Equal(t, true, started[1]["resumed"], "the second resumes the agent")
	assert.Equal(t, started[0]["engine_session_id"], started[1]["engine_session_id"], "of the same engine session")
}

// TestRuntimeUnsandboxedIsShownInReadyz runs up with --unsandboxed: its
// sidecars run unconfined, and /readyz says so while staying ready.
func TestRuntimeUnsandboxedIsShownInReadyz(t *testing.T) {
	u := startUpWithRuntime(t, "--unsandboxed")
	assert.Equal(t, "off", u.readyz()["sandbox"])
	id := u.start(map[string]any{"workingDirectory": "unconfined", "objective": "Say hello"})
	u.waitReview(id)
	_, err := os.Stat(filepath.Join(filepath.Dir(u.workspace), "sandboxes", id))
	assert.True(t, os.IsNotExist(err), "no sandbox was made")
}

// TestRuntimeRefusesToStartWithoutASandbox runs the runtime's check on a
// host without bwrap: it names the cause and the way out.
func TestRuntimeRefusesToStartWithoutASandbox(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := runtimeSandbox(context.Background(), sandboxSettings{MaxProcesses: 1, MaxMemory: 1 << 30}, "process")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "bwrap")
	assert.Contains(t, err.Error(), "--unsandboxed")
	sb, err := runtimeSandbox(context.Background(), sandboxSettings{Off: true}, "process")
	assert.NoError(t, err)
	assert.Nil(t, sb)
	sb, err = runtimeSandbox(context.Background(), sandboxSettings{}, "external")
	assert.NoError(t, err, "external mode starts no process and needs no sandbox")
	assert.Nil(t, sb)
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"4GiB": 4 << 30, "512MiB": 512 << 20, "2G": 2 << 30, "1024": 1024} {
		got, err := parseBytes(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "0", "-1G", "lots"} {
		_, err := parseBytes(in)
		assert.Error(t, err, in)
	}
}

// readyz returns the body of up's /readyz.
func (u *upUnderTest) readyz() map[string]any {
	u.t.Helper()
	resp, err := http.Get(u.base + "/readyz")
	require.NoError(u.t, err)
	defer resp.Body.Close()
	require.Equal(u.t, http.StatusOK, resp.StatusCode)
	var body map[string]any
	require.NoError(u.t, json.NewDecoder(resp.Body).Decode(&body))
	return body
}

// TestRuntimeAppliesTheTemplatesSandboxLimits starts a session of a
// template that sets its sandbox's limits; its validation command reads
// them.
func TestRuntimeAppliesTheTemplatesSandboxLimits(t *testing.T) {
	u := startUpWithRuntime(t)
	var tmpl struct {
		ID            string         `json:"id"`
		SandboxLimits map[string]any `json:"sandboxLimits"`
	}
	u.Must(http.MethodPost, "/api/agents/templates", map[string]any{
		"name": "small sandbox", "modelId": "claude-sonnet-4-5", "allowedTools": []string{"Bash"}, "defaultBudgetCapUsd": 5,
		"sandboxLimits": map[string]any{"maxProcesses": 64, "maxMemoryMiB": 1024},
	}, &tmpl)
	assert.Equal(t, map[string]any{"maxProcesses": float64(64), "maxMemoryMiB": float64(1024)}, tmpl.SandboxLimits)
	probe := `echo "--- limits: $(ulimit -d) $(cat /proc/self/limits | grep -i 'max processes' | tr -s ' ' | cut -d' ' -f3)"; false`
	id := u.start(map[string]any{"workingDirectory": "limited", "objective": "Say hello", "templateId": tmpl.ID,
		"autoContinue": map[string]any{"isEnabled": true, "maxContinuations": 1,
			"validationCriteria": []any{map[string]any{"type": "CustomCommand", "customCommand": probe}}}})
	var queue struct {
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	require.Eventually(t, func() bool {
		u.Must(http.MethodGet, "/api/agents/sessions/"+id+"/messages/queue", nil, &queue)
		return len(queue.Messages) > 0
	}, 2*wait, 50*time.Millisecond, "no continuation was delivered")
	assert.Contains(t, queue.Messages[0].Content, "--- limits: 1048576 64", "the template's limits hold in the sandbox")
}
