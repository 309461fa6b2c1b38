package launcher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/sidecar"
	"github.com/agentbus/agentbus/sidecar/launcher"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// TestMain doubles as the sidecar binary: the launcher under test runs this
// test binary with the arguments of `agentbus sidecar`.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "sidecar" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := sidecar.Main(ctx, os.Args[2:])
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	testenv.Main(m)
}

const wait = 30 * time.Second

type env struct {
	t        *testing.T
	rdb      *redis.Client
	redisURL string
	name     string
	logs     string
}

func newEnv(t *testing.T) *env {
	return &env{t: t, rdb: testenv.Redis(t), redisURL: testenv.RedisURL(t), name: "test-" + uuid.NewString()[:8], logs: t.TempDir()}
}

// launcher returns a started launcher; the test's end kills what it runs.
func (e *env) launcher(mode launcher.Mode, apiURL string) *launcher.Launcher {
	e.t.Helper()
	exe, err := os.Executable()
	require.NoError(e.t, err)
	l, err := launcher.New(launcher.Config{
		Mode: mode, Redis: e.rdb, RedisURL: e.redisURL, Binary: exe, APIURL: apiURL,
		ConfigDir: filepath.Join(e.logs, "configs"), LogDir: e.logs, Name: e.name,
		PollInterval: 100 * time.Millisecond,
	})
	require.NoError(e.t, err)
	require.NoError(e.t, l.Start(context.Background()))
	e.t.Cleanup(func() {
		for _, h := range l.Running() {
			_ = l.Kill(h.SessionID)
		}
		_ = l.Close()
	})
	return l
}

func config(t *testing.T, scenario string) protocol.Config {
	zero := int64(0)
	return protocol.Config{
		SessionID: uuid.NewString(), Objective: "Keep the service healthy", WorkingDirectory: t.TempDir(),
		Script: protocol.ScriptOptions{Scenario: scenario, PaceMS: &zero},
	}
}

// events returns a session's events.
func (e *env) events(id string) []protocol.Entry {
	e.t.Helper()
	msgs, err := e.rdb.XRange(context.Background(), protocol.EventsKey(id), "-", "+").Result()
	require.NoError(e.t, err)
	out := make([]protocol.Entry, 0, len(msgs))
	for _, m := range msgs {
		entry, err := protocol.ParseEntry(m.ID, m.Values)
		require.NoError(e.t, err)
		out = append(out, entry)
	}
	return out
}

// waitEvent waits up to timeout for an event of type typ.
func (e *env) waitEvent(id, typ string, timeout time.Duration) protocol.Entry {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, ev := range e.events(id) {
			if ev.Type == typ {
				return ev
			}
		}
		if time.Now().After(deadline) {
			logs, _ := os.ReadFile(filepath.Join(e.logs, id+".log"))
			e.t.Fatalf("no %s for session %s within %s; events: %v\nsidecar log:\n%s", typ, id, timeout, e.events(id), logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func endOf(t *testing.T, ev protocol.Entry) protocol.SessionEnd {
	var end protocol.SessionEnd
	require.NoError(t, json.Unmarshal(ev.Data, &end))
	return end
}

// recorded returns the session ids in the launcher's Redis records.
func (e *env) recorded() []string {
	ids, err := e.rdb.HKeys(context.Background(), "agentbus:launcher:"+e.name+":sidecars").Result()
	require.NoError(e.t, err)
	return ids
}

func TestProcessSidecarRunsTheSessionToItsEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := e.launcher(launcher.ModeProcess, "")
	cfg := config(t, "default")
	h, err := l.StartSession(context.Background(), cfg, "key-1")
	require.NoError(t, err)
	assert.Equal(t, cfg.SessionID, h.SessionID)
	pid, ok := l.PID(cfg.SessionID)
	require.True(t, ok)
	assert.Regexp(t, fmt.Sprintf(`^process:%s:%d:\d+$`, e.name, pid), h.RuntimeJobID)

	_, err = l.StartSession(context.Background(), cfg, "key-1")
	assert.ErrorIs(t, err, launcher.ErrAlreadyRunning)

	end := endOf(t, e.waitEvent(cfg.SessionID, protocol.EventSessionEnd, wait))
	assert.Equal(t, protocol.ReasonCompleted, end.Reason)
	started := e.waitEvent(cfg.SessionID, protocol.EventSessionStarted, wait)
	var s protocol.SessionStarted
	require.NoError(t, json.Unmarshal(started.Data, &s))
	assert.Equal(t, pid, s.PID)
	assert.Equal(t, cfg.WorkingDirectory, s.WorkingDirectory)

	// The launcher forgets the sidecar and adds no session_end of its own.
	require.Eventually(t, func() bool { return len(l.Running()) == 0 && len(e.recorded()) == 0 }, wait, 20*time.Millisecond)
	n := 0
	for _, ev := range e.events(cfg.SessionID) {
		if ev.Type == protocol.EventSessionEnd {
			n++
		}
	}
	assert.Equal(t, 1, n)
	_, err = os.Stat(filepath.Join(e.logs, "configs", cfg.SessionID+".json"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the config file is removed")
}

func TestSidecarGetsTheAgentAPIURLAndSessionKey(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		got = append(got, r.URL.Path+" "+r.Header.Get("X-Agent-Key"))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(api.Close)
	e := newEnv(t)
	l := e.launcher(launcher.ModeProcess, api.URL)
	cfg := config(t, "handoff")
	_, err := l.StartSession(context.Background(), cfg, "secret-key")
	require.NoError(t, err)
	end := endOf(t, e.waitEvent(cfg.SessionID, protocol.EventSessionEnd, wait))
	assert.Equal(t, protocol.ReasonVoluntaryHandoff, end.Reason)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"/api/agent/sessions/" + cfg.SessionID + "/handoff secret-key"}, got)
}

func TestKilledSidecarIsReportedWithinFiveSeconds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := e.launcher(launcher.ModeProcess, "")
	cfg := config(t, "long")
	_, err := l.StartSession(context.Background(), cfg, "k")
	require.NoError(t, err)
	e.waitEvent(cfg.SessionID, protocol.EventAssistantMessage, wait)
	pid, ok := l.PID(cfg.SessionID)
	require.True(t, ok)

	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	end := endOf(t, e.waitEvent(cfg.SessionID, protocol.EventSessionEnd, 5*time.Second))
	assert.Equal(t, protocol.StatusError, end.Status)
	assert.Equal(t, protocol.ReasonInfrastructureError, end.Reason)
	assert.Equal(t, protocol.FailureInfrastructureError, end.FailureReason)
	assert.Equal(t, -1, end.ExitCode)
	assert.Contains(t, end.Error, "signal: killed")
	require.Eventually(t, func() bool { return len(e.recorded()) == 0 }, wait, 20*time.Millisecond)
}

func TestRestartedLauncherAdoptsLiveSidecarsAndEndsGoneOnes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.launcher(launcher.ModeProcess, "")
	live, dead := config(t, "long"), config(t, "long")
	for _, cfg := range []protocol.Config{live, dead} {
		_, err := first.StartSession(context.Background(), cfg, "k")
		require.NoError(t, err)
		e.waitEvent(cfg.SessionID, protocol.EventAssistantMessage, wait)
	}
	livePID, _ := first.PID(live.SessionID)
	deadPID, _ := first.PID(dead.SessionID)
	t.Cleanup(func() { _ = syscall.Kill(livePID, syscall.SIGKILL) })

	// The launcher goes away; its sidecars do not. One dies meanwhile,
	// unnoticed.
	require.NoError(t, first.Close())
	require.NoError(t, syscall.Kill(deadPID, syscall.SIGKILL))
	require.Eventually(t, func() bool { return syscall.Kill(deadPID, 0) != nil }, wait, 20*time.Millisecond, "reaped")
	assert.ElementsMatch(t, []string{live.SessionID, dead.SessionID}, e.recorded())
	for _, ev := range e.events(dead.SessionID) {
		require.NotEqual(t, protocol.EventSessionEnd, ev.Type, "nobody reported it yet")
	}

	second := e.launcher(launcher.ModeProcess, "")
	end := endOf(t, e.waitEvent(dead.SessionID, protocol.EventSessionEnd, 5*time.Second))
	assert.Equal(t, protocol.ReasonInfrastructureError, end.Reason)
	running := second.Running()
	require.Len(t, running, 1)
	assert.Equal(t, live.SessionID, running[0].SessionID)
	assert.ElementsMatch(t, []string{live.SessionID}, e.recorded())

	// The adopted sidecar is watched: its death is reported too.
	require.NoError(t, syscall.Kill(livePID, syscall.SIGKILL))
	end = endOf(t, e.waitEvent(live.SessionID, protocol.EventSessionEnd, 5*time.Second))
	assert.Equal(t, protocol.ReasonInfrastructureError, end.Reason)
	assert.Contains(t, end.Error, "gone")
}

func TestKillEndsTheSidecarAndReportsIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := e.launcher(launcher.ModeProcess, "")
	cfg := config(t, "long")
	_, err := l.StartSession(context.Background(), cfg, "k")
	require.NoError(t, err)
	e.waitEvent(cfg.SessionID, protocol.EventSessionStarted, wait)
	require.NoError(t, l.Kill(cfg.SessionID))
	end := endOf(t, e.waitEvent(cfg.SessionID, protocol.EventSessionEnd, 5*time.Second))
	assert.Equal(t, protocol.ReasonInfrastructureError, end.Reason)
	assert.ErrorIs(t, l.Kill(cfg.SessionID), launcher.ErrNotRunning)
}

func TestExternalModeStartsNothingAndLeavesTheConfigInRedis(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := e.launcher(launcher.ModeExternal, "")
	cfg := config(t, "default")
	h, err := l.StartSession(context.Background(), cfg, "k")
	require.NoError(t, err)
	assert.Equal(t, "external:"+cfg.SessionID, h.RuntimeJobID)
	assert.Empty(t, l.Running())
	assert.Empty(t, e.events(cfg.SessionID))
	raw, err := e.rdb.Get(context.Background(), protocol.ConfigKey(cfg.SessionID)).Result()
	require.NoError(t, err)
	got, err := protocol.ParseConfig([]byte(raw))
	require.NoError(t, err)
	assert.Equal(t, cfg.Objective, got.Objective)

	// Someone else runs the sidecar with nothing but the session id: it
	// finds its config in Redis.
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "sidecar", "--session", cfg.SessionID)
	cmd.Env = []string{"REDIS_URL=" + e.redisURL}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	end := endOf(t, e.waitEvent(cfg.SessionID, protocol.EventSessionEnd, wait))
	assert.Equal(t, protocol.ReasonCompleted, end.Reason)
}

func TestStartSessionRefusesWhatCannotRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := e.launcher(launcher.ModeProcess, "")
	cases := map[string]func(*protocol.Config){
		"bad session id":           func(c *protocol.Config) { c.SessionID = "Not/Valid" },
		"missing working dir":      func(c *protocol.Config) { c.WorkingDirectory = filepath.Join(c.WorkingDirectory, "missing") },
		"relative working dir":     func(c *protocol.Config) { c.WorkingDirectory = "relative" },
		"unknown engine":           func(c *protocol.Config) { c.Engine = "magic" },
		"warn percent above a 100": func(c *protocol.Config) { c.Context.WarnPercent = 120 },
	}
	for name, mutate := range cases {
		cfg := config(t, "default")
		mutate(&cfg)
		_, err := l.StartSession(context.Background(), cfg, "k")
		assert.Error(t, err, name)
	}
	assert.Empty(t, l.Running())
}

func TestBadConfigFileEndsTheSessionWithAConfigError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := uuid.NewString()
	file := filepath.Join(t.TempDir(), "config.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"engine": 7}`), 0o600))
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "sidecar", "--session", id, "--config", file)
	cmd.Env = []string{"REDIS_URL=" + e.redisURL}
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "%s", out)
	end := endOf(t, e.waitEvent(id, protocol.EventSessionEnd, wait))
	assert.Equal(t, protocol.ReasonConfigError, end.Reason)
	assert.Equal(t, protocol.FailureInfrastructureError, end.FailureReason)
}
