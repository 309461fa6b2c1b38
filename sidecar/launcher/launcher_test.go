package launcher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
	"github.com/agentbus/agentbus/sidecar/sandbox"
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
	if len(os.Args) > 1 && os.Args[1] == "launcher" {
		if err := runLauncher(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	testenv.Main(m)
}

// runLauncher is a runtime in its own process, to be killed: it starts a
// launcher named LAUNCHER_NAME, starts the session of LAUNCHER_SESSION
// again unless its sidecar runs, and waits.
func runLauncher() error {
	var cfg protocol.Config
	if err := json.Unmarshal([]byte(os.Getenv("LAUNCHER_SESSION")), &cfg); err != nil {
		return err
	}
	ropts, err := redis.ParseURL(os.Getenv("REDIS_URL"))
	if err != nil {
		return err
	}
	rdb := redis.NewClient(ropts)
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	sb, err := sandbox.New(sandbox.Config{})
	if err != nil {
		return err
	}
	l, err := launcher.New(launcher.Config{Mode: launcher.ModeProcess, Redis: rdb, RedisURL: os.Getenv("REDIS_URL"),
		Binary: exe, ConfigDir: os.Getenv("LAUNCHER_DIR"), LogDir: os.Getenv("LAUNCHER_DIR"), Name: os.Getenv("LAUNCHER_NAME"),
		PollInterval: 100 * time.Millisecond, Sandbox: sb, SandboxDir: filepath.Join(os.Getenv("LAUNCHER_DIR"), "sandboxes")})
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := l.Start(ctx); err != nil {
		return err
	}
	if _, running := l.PID(cfg.SessionID); !running {
		if _, err := l.StartSession(ctx, cfg, "k"); err != nil {
			return err
		}
	}
	select {}
}

const wait = 30 * time.Second

// testSandbox returns the sandbox every sidecar of the tests runs in.
func testSandbox(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	sb, err := sandbox.New(sandbox.Config{})
	require.NoError(t, err)
	return sb
}

type env struct {
	t        *testing.T
	rdb      *redis.Client
	redisURL string
	name     string
	logs     string
	log      *slog.Logger // nil: slog.Default()
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
		PollInterval: 100 * time.Millisecond, Sandbox: testSandbox(e.t), SandboxDir: filepath.Join(e.logs, "sandboxes"),
		Logger: e.log,
	})
	require.NoError(e.t, err)
	require.NoError(e.t, l.Start(context.Background()))
	e.t.Cleanup(func() { _ = l.Close() })
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
	assert.Positive(t, s.PID, "its pid in its sandbox's own pid namespace")
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

func TestKilledSidecarIsMarkedToStartAgainWithoutEndingItsSession(t *testing.T) {
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
	select {
	case <-l.Exits():
	case <-time.After(wait):
		t.Fatal("the exit was not signalled")
	}
	exited, err := l.Exited(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{cfg.SessionID}, exited)
	for _, ev := range e.events(cfg.SessionID) {
		require.NotEqual(t, protocol.EventSessionEnd, ev.Type, "the session goes on")
	}

	// Started again, it runs; forgotten, it is not listed.
	_, err = l.StartSession(context.Background(), cfg, "k2")
	require.NoError(t, err)
	exited, err = l.Exited(context.Background())
	require.NoError(t, err)
	assert.Empty(t, exited)
	require.NoError(t, l.Stop(cfg.SessionID))
	assert.Empty(t, e.recorded(), "a stopped sidecar leaves no record")
}

func TestSidecarThatKeepsCrashingHasItsSessionEnded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	exe, err := os.Executable()
	require.NoError(t, err)
	l, err := launcher.New(launcher.Config{
		Mode: launcher.ModeProcess, Redis: e.rdb, RedisURL: e.redisURL, Binary: exe,
		ConfigDir: filepath.Join(e.logs, "configs"), LogDir: e.logs, Name: e.name, MaxCrashes: 2,
		Sandbox: testSandbox(t), SandboxDir: filepath.Join(e.logs, "sandboxes"),
	})
	require.NoError(t, err)
	require.NoError(t, l.Start(context.Background()))
	t.Cleanup(func() { _ = l.Close() })
	cfg := config(t, "long")
	for i := range 2 {
		_, err := l.StartSession(context.Background(), cfg, "k")
		require.NoError(t, err)
		pid, _ := l.PID(cfg.SessionID)
		e.waitEvent(cfg.SessionID, protocol.EventSessionStarted, wait)
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
		if i == 0 {
			<-l.Exits()
		}
	}
	end := endOf(t, e.waitEvent(cfg.SessionID, protocol.EventSessionEnd, wait))
	assert.Equal(t, protocol.ReasonInfrastructureError, end.Reason)
	assert.Equal(t, protocol.FailureInfrastructureError, end.FailureReason)
	assert.Contains(t, end.Error, "2 exits within")
	require.Eventually(t, func() bool { return len(e.recorded()) == 0 }, wait, 20*time.Millisecond)
}

// TestKilledLauncherDoesNotCountAsItsSidecarsCrashing kills the process
// running the launcher more often than MaxCrashes: each time the kernel
// stops its sidecar (Pdeathsig), and the next run starts it again. The
// session goes on; only exits the launcher saw count as crashes.
func TestKilledLauncherDoesNotCountAsItsSidecarsCrashing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	exe, err := os.Executable()
	require.NoError(t, err)
	cfg := config(t, "long")
	raw, err := json.Marshal(cfg)
	require.NoError(t, err)
	key := "agentbus:launcher:" + e.name + ":sidecars"
	sidecarPID := func() int {
		var rec struct {
			PID    int  `json:"pid"`
			Exited bool `json:"exited"`
		}
		if json.Unmarshal([]byte(e.rdb.HGet(context.Background(), key, cfg.SessionID).Val()), &rec) != nil || rec.Exited {
			return 0
		}
		return rec.PID
	}
	last := 0
	for round := range 4 {
		cmd := exec.Command(exe, "launcher")
		cmd.Env = append(os.Environ(), "LAUNCHER_SESSION="+string(raw), "LAUNCHER_NAME="+e.name,
			"LAUNCHER_DIR="+e.logs, "REDIS_URL="+e.redisURL)
		out, err := os.Create(filepath.Join(e.logs, fmt.Sprintf("launcher-%d.log", round)))
		require.NoError(t, err)
		cmd.Stdout, cmd.Stderr = out, out
		require.NoError(t, cmd.Start())
		out.Close()
		var pid int
		if !assert.Eventually(t, func() bool { pid = sidecarPID(); return pid > 0 && pid != last }, wait, 20*time.Millisecond) {
			log, _ := os.ReadFile(out.Name())
			t.Fatalf("round %d: no new sidecar runs; launcher log:\n%s", round, log)
		}
		last = pid
		e.waitEvent(cfg.SessionID, protocol.EventSessionStarted, wait)
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()
		require.Eventually(t, func() bool { return syscall.Kill(pid, 0) != nil }, wait, 20*time.Millisecond,
			"round %d: the sidecar ends with its launcher", round)
		for _, ev := range e.events(cfg.SessionID) {
			require.NotEqual(t, protocol.EventSessionEnd, ev.Type, "round %d: the session goes on", round)
		}
	}
	l := e.launcher(launcher.ModeProcess, "")
	exited, err := l.Exited(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{cfg.SessionID}, exited, "the session's sidecar is to be started again")
	for _, ev := range e.events(cfg.SessionID) {
		require.NotEqual(t, protocol.EventSessionEnd, ev.Type, "the session goes on")
	}
	assert.NotContains(t, e.rdb.HGet(context.Background(), key, cfg.SessionID).Val(), "crashes", "no crash is counted")
}

func TestCloseStopsEverySidecarAndKeepsThemToStartAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := e.launcher(launcher.ModeProcess, "")
	var pids []int
	var ids []string
	for range 2 {
		cfg := config(t, "long")
		_, err := l.StartSession(context.Background(), cfg, "k")
		require.NoError(t, err)
		e.waitEvent(cfg.SessionID, protocol.EventAssistantMessage, wait)
		pid, _ := l.PID(cfg.SessionID)
		pids, ids = append(pids, pid), append(ids, cfg.SessionID)
	}
	require.NoError(t, l.Close())
	for _, pid := range pids {
		assert.Error(t, syscall.Kill(pid, 0), "sidecar %d is gone once Close returns", pid)
	}
	for _, id := range ids {
		// The SIGTERM reached the sidecar inside its sandbox, not only
		// bwrap, whose death would have killed it before it suspended.
		log, err := os.ReadFile(filepath.Join(e.logs, id+".log"))
		require.NoError(t, err)
		assert.Contains(t, string(log), "sidecar suspended", "the sidecar of %s suspended", id)
	}
	for _, id := range ids {
		for _, ev := range e.events(id) {
			require.NotEqual(t, protocol.EventSessionEnd, ev.Type, "the session goes on")
		}
	}
	next := e.launcher(launcher.ModeProcess, "")
	exited, err := next.Exited(context.Background())
	require.NoError(t, err)
	assert.ElementsMatch(t, ids, exited, "the next launcher is told to start them again")
}

func TestRestartedLauncherAdoptsLiveSidecarsAndMarksGoneOnes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	exe, err := os.Executable()
	require.NoError(t, err)
	// A sidecar left running by a launcher that died, and the record of one
	// that died with it.
	live, dead := config(t, "long"), config(t, "long")
	cmd := exec.Command(exe, "sidecar", "--session", live.SessionID)
	cmd.Env = []string{"REDIS_URL=" + e.redisURL, `AGENTBUS_SIDECAR_CONFIG={"objective":"x","script":{"scenario":"long"}}`}
	require.NoError(t, cmd.Start())
	go func() { _ = cmd.Wait() }()
	e.waitEvent(live.SessionID, protocol.EventSessionStarted, wait)
	recs := map[string]any{
		live.SessionID: fmt.Sprintf(`{"runtime_job_id":"process:old:%d:1","pid":%d,"started_at":1}`, cmd.Process.Pid, cmd.Process.Pid),
		dead.SessionID: `{"runtime_job_id":"process:old:999999:1","pid":999999,"started_at":1}`,
	}
	require.NoError(t, e.rdb.HSet(context.Background(), "agentbus:launcher:"+e.name+":sidecars", recs).Err())

	l := e.launcher(launcher.ModeProcess, "")
	running := l.Running()
	require.Len(t, running, 1)
	assert.Equal(t, live.SessionID, running[0].SessionID)
	exited, err := l.Exited(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{dead.SessionID}, exited)

	// The adopted sidecar is watched: its death marks it too.
	require.NoError(t, cmd.Process.Kill())
	require.Eventually(t, func() bool {
		exited, err := l.Exited(context.Background())
		return err == nil && len(exited) == 2
	}, wait, 20*time.Millisecond)
}

func TestSidecarInheritsOnlyTheAllowedEnvironment(t *testing.T) {
	t.Setenv("AGENTBUS_JWT_SECRET", "server-secret")
	t.Setenv("DATABASE_URL", "postgres://server-secret@127.0.0.1/x")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/model")
	t.Setenv("AGENTBUS_CLAUDE_BIN", "/opt/claude")
	e := newEnv(t)
	l := e.launcher(launcher.ModeProcess, "")
	cfg := config(t, "long")
	_, err := l.StartSession(context.Background(), cfg, "k")
	require.NoError(t, err)
	e.waitEvent(cfg.SessionID, protocol.EventSessionStarted, wait)
	pid, _ := l.PID(cfg.SessionID)
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	require.NoError(t, err)
	environ := string(raw)
	assert.NotContains(t, environ, "server-secret")
	assert.Contains(t, environ, "ANTHROPIC_BASE_URL=http://127.0.0.1:9/model")
	assert.Contains(t, environ, "AGENTBUS_CLAUDE_BIN=/opt/claude")
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

	// Someone else runs the sidecar with what the launch record says: its
	// session's own Redis user, which reaches no other session's keys,
	// and the session's key. It finds its config in Redis.
	ctx := context.Background()
	launch, err := e.rdb.HGetAll(ctx, launcher.LaunchKey(cfg.SessionID)).Result()
	require.NoError(t, err)
	assert.Equal(t, "k", launch["session_key"])
	opts, err := redis.ParseURL(launch["redis_url"])
	require.NoError(t, err)
	assert.Equal(t, "sidecar-"+cfg.SessionID, opts.Username, "the sidecar logs in as its session's own user")
	own := redis.NewClient(opts)
	defer own.Close()
	assert.Error(t, own.Get(ctx, protocol.ConfigKey(uuid.NewString())).Err(), "another session's keys are out of its reach")
	assert.Error(t, own.HGetAll(ctx, launcher.LaunchKey(cfg.SessionID)).Err(), "the launch record is out of its reach")
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "sidecar", "--session", cfg.SessionID)
	cmd.Env = []string{"REDIS_URL=" + launch["redis_url"], "AGENTBUS_SESSION_KEY=" + launch["session_key"]}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	end := endOf(t, e.waitEvent(cfg.SessionID, protocol.EventSessionEnd, wait))
	assert.Equal(t, protocol.ReasonCompleted, end.Reason)

	// The session is over: its record and its user go.
	require.NoError(t, l.Forget(ctx, cfg.SessionID))
	n, err := e.rdb.Exists(ctx, launcher.LaunchKey(cfg.SessionID)).Result()
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Error(t, own.Ping(ctx).Err(), "the session's Redis user is gone")
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

func TestEachSidecarReachesOnlyItsOwnSessionInRedis(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := e.launcher(launcher.ModeProcess, "")
	cfg := config(t, "long")
	_, err := l.StartSession(context.Background(), cfg, "k")
	require.NoError(t, err)
	e.waitEvent(cfg.SessionID, protocol.EventAssistantMessage, wait)
	pid, _ := l.PID(cfg.SessionID)
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	require.NoError(t, err)
	var url string
	for _, kv := range strings.Split(string(environ), "\x00") {
		if v, ok := strings.CutPrefix(kv, "REDIS_URL="); ok {
			url = v
		}
	}
	require.NotEqual(t, e.redisURL, url, "the sidecar has a Redis user of its own")
	opts, err := redis.ParseURL(url)
	require.NoError(t, err)
	as := redis.NewClient(opts)
	defer as.Close()
	ctx := context.Background()

	other := uuid.NewString()
	require.NoError(t, e.rdb.XAdd(ctx, &redis.XAddArgs{Stream: protocol.CommandsKey(other), Values: map[string]any{"type": "pause"}}).Err())
	err = as.XAdd(ctx, &redis.XAddArgs{Stream: protocol.EventsKey(other), Values: map[string]any{"type": "session_end", "data": "{}"}}).Err()
	assert.ErrorContains(t, err, "NOPERM", "it cannot forge another session's events")
	err = as.XRead(ctx, &redis.XReadArgs{Streams: []string{protocol.CommandsKey(other), "0"}, Count: 1, Block: -1}).Err()
	assert.ErrorContains(t, err, "NOPERM", "it cannot read another session's commands")
	err = as.HGetAll(ctx, "agentbus:launcher:"+e.name+":sidecars").Err()
	assert.ErrorContains(t, err, "NOPERM", "it cannot read the launcher's records")
	require.NoError(t, as.XAdd(ctx, &redis.XAddArgs{Stream: protocol.EventsKey(cfg.SessionID), Values: map[string]any{"type": "error", "data": "{}"}}).Err(),
		"its own session's stream it may write")

	require.NoError(t, l.Stop(cfg.SessionID))
	assert.Error(t, as.Ping(ctx).Err(), "the user is gone with its sidecar")
}

// TestSidecarKeepsItsRedisUserAcrossARedisRestart: Redis keeps ACL users
// in memory only, so a restarted Redis has lost the sidecars' users; the
// launcher creates them again and the sidecar carries on with its own.
func TestSidecarKeepsItsRedisUserAcrossARedisRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	srv := testenv.PrivateRedis(t)
	e.redisURL = srv.URL()
	e.rdb = testenv.RedisClient(t, e.redisURL)
	l := e.launcher(launcher.ModeProcess, "")
	cfg := config(t, "long")
	_, err := l.StartSession(context.Background(), cfg, "k")
	require.NoError(t, err)
	e.waitEvent(cfg.SessionID, protocol.EventAssistantMessage, wait)
	pid, _ := l.PID(cfg.SessionID)
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	require.NoError(t, err)
	var url string
	for _, kv := range strings.Split(string(environ), "\x00") {
		if v, ok := strings.CutPrefix(kv, "REDIS_URL="); ok {
			url = v
		}
	}
	opts, err := redis.ParseURL(url)
	require.NoError(t, err)
	require.NotEmpty(t, opts.Username, "the sidecar has a Redis user of its own")
	opts.MaxRetries = -1
	as := redis.NewClient(opts)
	defer as.Close()
	ctx := context.Background()

	srv.Kill()
	srv = testenv.RestartRedis(t, srv)
	require.Eventually(t, func() bool { return as.Ping(ctx).Err() == nil }, wait, 50*time.Millisecond,
		"the sidecar's user is back after the restart")
	require.NoError(t, as.XAdd(ctx, &redis.XAddArgs{Stream: protocol.EventsKey(cfg.SessionID), Values: map[string]any{"type": "error", "data": "{}"}}).Err(),
		"with what it may do to its own session")
	err = as.XAdd(ctx, &redis.XAddArgs{Stream: protocol.EventsKey(uuid.NewString()), Values: map[string]any{"type": "session_end", "data": "{}"}}).Err()
	assert.ErrorContains(t, err, "NOPERM", "and no more")
	_, running := l.PID(cfg.SessionID)
	assert.True(t, running, "the sidecar carries on")
}

// TestASidecarThatExitsWhileRedisIsDownIsMarkedOnceRedisIsBack: the
// launcher waits for Redis to record the exit, so the runtime starts the
// sidecar again, instead of leaving a record of a sidecar still running.
func TestASidecarThatExitsWhileRedisIsDownIsMarkedOnceRedisIsBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	srv := testenv.PrivateRedis(t)
	e.redisURL = srv.URL()
	e.rdb = testenv.RedisClient(t, e.redisURL)
	logged := &messages{}
	e.log = slog.New(logged)
	l := e.launcher(launcher.ModeProcess, "")
	cfg := config(t, "long")
	_, err := l.StartSession(context.Background(), cfg, "k")
	require.NoError(t, err)
	e.waitEvent(cfg.SessionID, protocol.EventAssistantMessage, wait)
	pid, ok := l.PID(cfg.SessionID)
	require.True(t, ok)

	srv.Kill()
	require.NoError(t, syscall.Kill(-pid, syscall.SIGKILL))
	// Redis stays down until the launcher's bookkeeping of the exit has
	// failed on it: given up, or waiting for Redis.
	require.Eventually(t, func() bool { return logged.has("exited sidecar") }, wait, 20*time.Millisecond,
		"the launcher found Redis down")
	srv = testenv.RestartRedis(t, srv)

	require.Eventually(t, func() bool {
		exited, err := l.Exited(context.Background())
		return err == nil && slices.Contains(exited, cfg.SessionID)
	}, wait, 50*time.Millisecond, "the sidecar is marked to start again")
}

// messages is a log handler that keeps the messages of warnings and
// errors.
type messages struct {
	mu   sync.Mutex
	msgs []string
}

func (m *messages) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (m *messages) WithAttrs([]slog.Attr) slog.Handler           { return m }
func (m *messages) WithGroup(string) slog.Handler                { return m }

func (m *messages) Handle(_ context.Context, r slog.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.msgs = append(m.msgs, r.Message)
	return nil
}

// has reports whether a message contains s.
func (m *messages) has(s string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.ContainsFunc(m.msgs, func(msg string) bool { return strings.Contains(msg, s) })
}

// descendants returns the pids of pid's descendants.
func descendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		s := string(raw)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if ppid, err := strconv.Atoi(fields[1]); err == nil {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}

func TestKillingTheRecordedPIDTakesTheWholeSandboxDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := e.launcher(launcher.ModeProcess, "")
	cfg := config(t, "long")
	_, err := l.StartSession(context.Background(), cfg, "k")
	require.NoError(t, err)
	e.waitEvent(cfg.SessionID, protocol.EventAssistantMessage, wait)
	pid, _ := l.PID(cfg.SessionID)
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	stat := strings.Fields(string(raw)[strings.LastIndexByte(string(raw), ')')+1:])
	assert.Equal(t, strconv.Itoa(pid), stat[3], "the sandbox is a session of its own")
	assert.Equal(t, "0", stat[4], "with no controlling terminal")
	inside := descendants(pid)
	require.NotEmpty(t, inside, "bwrap runs the sidecar as a child")
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	for _, p := range inside {
		require.Eventually(t, func() bool {
			raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
			return err != nil || strings.Contains(string(raw), ") Z ")
		}, wait, 20*time.Millisecond, "process %d of the sandbox outlived its bwrap", p)
	}
}

func TestTheSandboxKeepsItsHomeAcrossRestartsAndGoesWithTheSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := e.launcher(launcher.ModeProcess, "")
	cfg := config(t, "long")
	home := filepath.Join(e.logs, "sandboxes", cfg.SessionID, "home")
	_, err := l.StartSession(context.Background(), cfg, "k")
	require.NoError(t, err)
	e.waitEvent(cfg.SessionID, protocol.EventSessionStarted, wait)
	require.DirExists(t, home)
	require.NoError(t, os.WriteFile(filepath.Join(home, "note"), []byte("kept"), 0o600))
	pid, _ := l.PID(cfg.SessionID)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	<-l.Exits()
	assert.FileExists(t, filepath.Join(home, "note"), "a crash keeps the session's home")

	_, err = l.StartSession(context.Background(), cfg, "k")
	require.NoError(t, err)
	assert.FileExists(t, filepath.Join(home, "note"), "the sidecar started again finds it")
	require.NoError(t, l.Stop(cfg.SessionID))
	assert.NoDirExists(t, filepath.Dir(home), "a session that is over leaves no sandbox behind")
}
