package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentbus/agentbus/sidecar/protocol"
	"github.com/agentbus/agentbus/sidecar/sandbox"
)

// Where the sidecar finds its binary, its config and the engine's
// programs inside its sandbox.
const (
	binaryInside   = "/run/agentbus/agentbus"
	configInside   = "/run/agentbus/sidecar.json"
	programsInside = "/run/agentbus/bin"
	// checkpointsInside is where the session's checkpoint store is bound.
	checkpointsInside = "/run/agentbus/checkpoints.git"
)

// StartOption adjusts how one sidecar starts.
type StartOption func(*startOptions)

type startOptions struct {
	maxProcesses int
	maxMemory    int64
	redisURL     string
}

// WithLimits overrides the limits of the sidecar's sandbox: processes, and
// bytes of memory per process; a zero keeps the Sandbox's.
func WithLimits(maxProcesses int, maxMemory int64) StartOption {
	return func(o *startOptions) { o.maxProcesses, o.maxMemory = maxProcesses, maxMemory }
}

// WithRedisURL hands the sidecar the URL of a Redis user its placer made
// for the session, instead of one the launcher makes.
func WithRedisURL(url string) StartOption {
	return func(o *startOptions) { o.redisURL = url }
}

// RedisURLOf returns the URL opts hand the sidecar (WithRedisURL), ""
// when none does: for sidecars a runner starts by other means than a
// launcher.
func RedisURLOf(opts ...StartOption) string {
	var o startOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o.redisURL
}

// redisURL returns the URL the session's sidecar connects with, and the
// hash of its password when the launcher made the user.
func (l *Launcher) redisURL(ctx context.Context, id string, o startOptions) (string, string) {
	if o.redisURL != "" {
		return o.redisURL, ""
	}
	return l.sessionRedisURL(ctx, id)
}

// StartSession starts the sidecar of cfg.SessionID with the session's
// agent API key (StartSessionAsync of the seed's IAgentRuntime).
func (l *Launcher) StartSession(ctx context.Context, cfg protocol.Config, apiKey string, opts ...StartOption) (Handle, error) {
	var o startOptions
	for _, opt := range opts {
		opt(&o)
	}
	cfg, raw, err := l.sidecarConfig(cfg)
	if err != nil {
		return Handle{}, err
	}
	if l.cfg.Mode == ModeExternal {
		return l.startExternal(ctx, cfg.SessionID, raw, apiKey, o)
	}
	if cfg.WorkingDirectory != "" {
		if st, err := os.Stat(cfg.WorkingDirectory); err != nil || !st.IsDir() {
			return Handle{}, fmt.Errorf("launcher: working directory %q is not a directory", cfg.WorkingDirectory)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return Handle{}, ErrClosed
	case l.running[cfg.SessionID] != nil:
		return Handle{}, ErrAlreadyRunning
	}
	return l.startProcess(ctx, cfg, raw, apiKey, o)
}

// sidecarConfig completes the sidecar's config (its defaults and its
// checkpoint store), checks it and returns it with its JSON.
func (l *Launcher) sidecarConfig(cfg protocol.Config) (protocol.Config, []byte, error) {
	id := cfg.SessionID
	if !protocol.ValidSessionID(id) {
		return cfg, nil, fmt.Errorf("launcher: session id %q may hold only a-z, 0-9, '-' and '_'", id)
	}
	cfg.SetDefaults()
	if store := l.CheckpointStore(id); store != "" {
		if err := os.MkdirAll(store, 0o700); err != nil {
			return cfg, nil, fmt.Errorf("launcher: %w", err)
		}
		cfg.CheckpointStore = store
		cfg.CheckpointKeep = l.cfg.CheckpointRetention.Keep
		cfg.CheckpointMaxAgeSeconds = int64(l.cfg.CheckpointRetention.MaxAge / time.Second)
		if l.cfg.Sandbox != nil {
			cfg.CheckpointStore = checkpointsInside
		}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, nil, fmt.Errorf("launcher: %w", err)
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return cfg, nil, fmt.Errorf("launcher: %w", err)
	}
	return cfg, raw, nil
}

// startExternal leaves in Redis what the sidecar of a session that someone
// else runs starts with: its config, and how it connects.
func (l *Launcher) startExternal(ctx context.Context, id string, raw []byte, apiKey string, o startOptions) (Handle, error) {
	if err := l.cfg.Redis.Set(ctx, protocol.ConfigKey(id), raw, 0).Err(); err != nil {
		return Handle{}, fmt.Errorf("launcher: store the config: %w", err)
	}
	// Whoever runs the sidecar reads how it connects from here: a Redis
	// user of the session's own and the session's agent key. A sidecar's
	// user cannot read it (it reaches agent:session:{<id>} keys only).
	redisURL, _ := l.redisURL(ctx, id, o)
	if err := l.cfg.Redis.HSet(ctx, LaunchKey(id), "redis_url", redisURL, "session_key", apiKey,
		"api_url", l.cfg.APIURL).Err(); err != nil {
		return Handle{}, fmt.Errorf("launcher: store the launch record: %w", err)
	}
	return Handle{SessionID: id, RuntimeJobID: "external:" + id}, nil
}

// startProcess writes the sidecar's config file and starts its process,
// then records it; l.mu is held.
func (l *Launcher) startProcess(ctx context.Context, cfg protocol.Config, raw []byte, apiKey string, o startOptions) (Handle, error) {
	id := cfg.SessionID
	if err := os.MkdirAll(l.cfg.ConfigDir, 0o700); err != nil {
		return Handle{}, fmt.Errorf("launcher: %w", err)
	}
	file := filepath.Join(l.cfg.ConfigDir, id+".json")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		return Handle{}, fmt.Errorf("launcher: write the config: %w", err)
	}
	redisURL, redisPasswordHash := l.redisURL(ctx, id, o)
	cmd, closeOutput, err := l.command(id, file, cfg.WorkingDirectory, redisURL, apiKey, o)
	if err != nil {
		_ = os.Remove(file)
		return Handle{}, err
	}
	err = cmd.Start()
	closeOutput()
	if err != nil {
		_ = os.Remove(file)
		return Handle{}, fmt.Errorf("launcher: start the sidecar: %w", err)
	}
	pid := cmd.Process.Pid
	started := time.Now().UnixMilli()
	rec := record{
		RuntimeJobID: fmt.Sprintf("process:%s:%d:%d", l.cfg.Name, pid, started),
		PID:          pid, ProcStart: procStart(pid), ConfigFile: file, StartedAt: started, Sandboxed: l.cfg.Sandbox != nil,
		Crashes: l.crashes(ctx, id), RedisPasswordSHA256: redisPasswordHash, Attempt: cfg.Attempt,
	}
	return l.track(ctx, id, cmd, rec)
}

// track records a sidecar just started and watches it; one that cannot be
// recorded is killed, since it could not be watched across a restart.
func (l *Launcher) track(ctx context.Context, id string, cmd *exec.Cmd, rec record) (Handle, error) {
	p := &sidecarProc{handle: Handle{SessionID: id, RuntimeJobID: rec.RuntimeJobID}, rec: rec, cmd: cmd, gone: make(chan struct{})}
	if err := l.store(ctx, id, rec); err != nil {
		_ = syscall.Kill(-rec.PID, syscall.SIGKILL)
		_ = cmd.Wait()
		_ = os.Remove(rec.ConfigFile)
		return Handle{}, err
	}
	l.running[id] = p
	Live.Inc()
	Starts.WithLabelValues(strconv.FormatBool(len(rec.Crashes) > 0)).Inc()
	go l.wait(p)
	l.log.Info("sidecar started", "session_id", id, "pid", rec.PID, "runtime_job_id", rec.RuntimeJobID)
	return p.handle, nil
}

// LaunchKey is the Redis hash where a launcher in external mode leaves, for
// whoever runs the session's sidecar, what it connects with: redis_url (a
// Redis user of the session's own), session_key and api_url, given to the
// sidecar as REDIS_URL, AGENTBUS_SESSION_KEY and AGENTBUS_API_URL.
func LaunchKey(sessionID string) string { return "agentbus:launch:" + sessionID }

// command builds the sidecar's command; closeOutput closes this process's
// copy of the sidecar's log file once the child holds it.
func (l *Launcher) command(id, file, dir, redisURL, apiKey string, o startOptions) (*exec.Cmd, func(), error) {
	env := inherited(l.cfg.InheritEnv, os.Environ())
	env = append(env, "REDIS_URL="+redisURL, "AGENTBUS_API_URL="+l.cfg.APIURL, "AGENTBUS_SESSION_KEY="+apiKey)
	env = append(env, l.cfg.Env...)
	argv := append([]string{l.cfg.Binary}, l.cfg.Args...)
	argv = append(argv, "--session", id, "--config", file)
	if l.cfg.Sandbox == nil {
		l.log.Warn("sidecar starts unsandboxed: its agent reaches everything this process's user does", "session_id", id)
	} else {
		var err error
		if argv, env, err = l.sandboxed(id, file, dir, env, o); err != nil {
			return nil, nil, err
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	// A session of its own: no terminal of the launcher's is reachable (no
	// keystrokes pushed into it with TIOCSTI), a signal to the launcher's
	// group (Ctrl-C) does not reach it before the launcher stops it in
	// order, and a signal to its group reaches the engine's children too.
	// Should the launcher die without stopping it (kill -9), the kernel
	// sends it SIGTERM, so no sidecar is left behind (bwrap, which dies
	// of it, takes its sandbox along); the next launcher starts it again.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGTERM}
	// The output is a file, never a pipe, so a sidecar keeps writing its
	// log after the launcher is gone.
	if l.cfg.LogDir == "" {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		return cmd, func() {}, nil
	}
	if err := os.MkdirAll(l.cfg.LogDir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("launcher: %w", err)
	}
	out, err := os.OpenFile(filepath.Join(l.cfg.LogDir, id+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("launcher: %w", err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	return cmd, func() { _ = out.Close() }, nil
}

// sandboxed returns the command line and environment that run the
// sidecar of argv in the session's sandbox: the binary and the config file
// are bound read-only at fixed paths, and so is each of the engine's
// programs named in env by SandboxPrograms.
func (l *Launcher) sandboxed(id, file, dir string, env []string, o startOptions) ([]string, []string, error) {
	state, err := filepath.Abs(filepath.Join(l.cfg.SandboxDir, id))
	if err != nil {
		return nil, nil, fmt.Errorf("launcher: %w", err)
	}
	if dir != "" {
		if dir, err = filepath.Abs(dir); err != nil {
			return nil, nil, fmt.Errorf("launcher: %w", err)
		}
	}
	spec := sandbox.Spec{Dir: dir, State: state,
		ReadOnly:     []sandbox.Bind{{Host: l.cfg.Binary, Inside: binaryInside}, {Host: file, Inside: configInside}},
		MaxProcesses: o.maxProcesses, MaxMemory: o.maxMemory}
	if store := l.CheckpointStore(id); store != "" {
		spec.ReadWrite = append(spec.ReadWrite, sandbox.Bind{Host: store, Inside: checkpointsInside})
	}
	if spec.Dir == "" {
		spec.Dir = filepath.Join(spec.State, "work")
		if err := os.MkdirAll(spec.Dir, 0o700); err != nil {
			return nil, nil, fmt.Errorf("launcher: %w", err)
		}
	}
	for i, kv := range env {
		name, path, _ := strings.Cut(kv, "=")
		if !slices.Contains(l.cfg.SandboxPrograms, name) || path == "" {
			continue
		}
		host, err := filepath.EvalSymlinks(path)
		if err != nil {
			continue // the engine reports the missing program as the session's failure
		}
		inside := programsInside + "/" + filepath.Base(host)
		spec.ReadOnly = append(spec.ReadOnly, sandbox.Bind{Host: host, Inside: inside})
		env[i] = name + "=" + inside
	}
	argv := append([]string{binaryInside}, l.cfg.Args...)
	argv = append(argv, "--session", id, "--config", configInside)
	argv, err = l.cfg.Sandbox.Command(spec, argv...)
	if err != nil {
		return nil, nil, fmt.Errorf("launcher: %w", err)
	}
	return argv, append(env, sandbox.Env()...), nil
}

// dropSandbox removes the sandbox directories of a session that is over.
func (l *Launcher) dropSandbox(id string) {
	if err := os.RemoveAll(filepath.Join(l.cfg.SandboxDir, id)); err != nil {
		l.log.Warn("sandbox directory not removed", "session_id", id, "error", err)
	}
}

// signalGroupBut sends sig to every process of the process group pgid
// but its leader.
func signalGroupBut(pgid int, sig syscall.Signal) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == pgid {
			continue
		}
		if group, err := procGroup(pid); err == nil && group == pgid {
			_ = syscall.Kill(pid, sig)
		}
	}
}

func (l *Launcher) store(ctx context.Context, id string, rec record) error {
	raw, _ := json.Marshal(rec)
	if err := l.cfg.Redis.HSet(ctx, l.key, id, raw).Err(); err != nil {
		return fmt.Errorf("launcher: record the sidecar: %w", err)
	}
	return nil
}

// inherited returns the variables of environ that names allows; a name
// ending in "*" allows every variable with that prefix.
func inherited(names, environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		for _, n := range names {
			if prefix, ok := strings.CutSuffix(n, "*"); ok && strings.HasPrefix(name, prefix) || n == name {
				out = append(out, kv)
				break
			}
		}
	}
	return out
}

// crashes returns the recent crash times recorded for the session.
func (l *Launcher) crashes(ctx context.Context, id string) []int64 {
	raw, err := l.cfg.Redis.HGet(ctx, l.key, id).Bytes()
	if err != nil {
		return nil
	}
	var rec record
	if json.Unmarshal(raw, &rec) != nil {
		return nil
	}
	return rec.Crashes
}

// wait waits for a child sidecar to exit.
func (l *Launcher) wait(p *sidecarProc) {
	_ = p.cmd.Wait()
	st := p.cmd.ProcessState
	l.exited(p, st.ExitCode(), st.String(), true)
}

// poll checks an adopted sidecar until it is gone.
func (l *Launcher) poll(p *sidecarProc) {
	defer l.wg.Done()
	t := time.NewTicker(l.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
			if !alive(p.rec.PID, p.rec.ProcStart) {
				l.exited(p, -1, "the adopted sidecar process is gone", false)
				return
			}
		}
	}
}

// exited handles a sidecar that exited. One that ended its session, or
// that Stop ended, leaves no record. One that exited without ending its
// session is marked exited for the runtime to start again, unless it
// crashed MaxCrashes times within CrashWindow: then its session is ended
// for it. Only the exit of a child, seen by this launcher, counts as a
// crash (observed): a sidecar an earlier run of the launcher started ends
// when that run dies (the kernel sends it SIGTERM, and it suspends), so
// its exit says nothing about the session, and a launcher restarted
// again and again must not end every session it runs.
func (l *Launcher) exited(p *sidecarProc, exitCode int, how string, observed bool) {
	defer close(p.gone)
	id := p.handle.SessionID
	l.mu.Lock()
	if l.running[id] == p {
		delete(l.running, id)
		Live.Dec()
	}
	stopping, closed := p.stopping, l.closed
	l.mu.Unlock()
	if p.rec.ConfigFile != "" {
		_ = os.Remove(p.rec.ConfigFile)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ended := l.ended(id)
	rec := p.rec
	switch {
	case stopping || ended:
		l.log.Info("sidecar exited", "session_id", id, "exit_code", exitCode)
		l.dropUser(ctx, id)
		l.dropSandbox(id)
		if err := l.untilRedisAnswers("removing the record of an exited sidecar", id, func(ctx context.Context) error {
			return l.cfg.Redis.HDel(ctx, l.key, id).Err()
		}); err != nil {
			l.log.Warn("record not removed", "session_id", id, "error", err)
		}
		return
	case closed:
		l.log.Info("sidecar stopped with the launcher", "session_id", id, "exit_code", exitCode)
	case !observed:
		l.log.Warn("sidecar of an earlier run of the launcher exited; it will be started again", "session_id", id, "how", how)
	default:
		now := time.Now()
		rec.Crashes = recent(append(rec.Crashes, now.UnixMilli()), now.Add(-l.cfg.CrashWindow).UnixMilli())
		if len(rec.Crashes) >= l.cfg.MaxCrashes {
			l.giveUp(ctx, id, exitCode, fmt.Sprintf("%s; %d exits within %s", how, len(rec.Crashes), l.cfg.CrashWindow))
			return
		}
		l.log.Warn("sidecar exited without ending its session; it will be started again", "session_id", id, "exit_code", exitCode, "how", how)
	}
	rec.Exited = true
	if err := l.untilRedisAnswers("recording an exited sidecar", id, func(ctx context.Context) error {
		return l.store(ctx, id, rec)
	}); err != nil {
		l.log.Error("exited sidecar not recorded", "session_id", id, "error", err)
	}
	if !closed {
		select {
		case l.exits <- struct{}{}:
		default:
		}
	}
}

// ended reports whether the exited sidecar ended its session.
func (l *Launcher) ended(id string) bool {
	var ended bool
	err := l.untilRedisAnswers("reading the end of the session of an exited sidecar", id, func(ctx context.Context) (err error) {
		ended, err = sessionEnded(ctx, l.cfg.Redis, id)
		return err
	})
	if err != nil {
		l.log.Error("could not tell whether the sidecar ended its session; it will be started again", "session_id", id, "error", err)
	}
	return ended
}

// untilRedisAnswers runs op, a read or write of an exited sidecar's
// session or record, again until Redis answers it or the launcher closes.
// Given up on, a record would stay as it was, of a sidecar running: no one
// would start the sidecar again, and its session would wait for it for
// good (a cancel never confirmed, messages never delivered). Redis down or
// loading its data after a restart is an outage to wait out.
func (l *Launcher) untilRedisAnswers(what, id string, op func(context.Context) error) error {
	for failures := 0; ; failures++ {
		ctx, cancel := context.WithTimeout(l.ctx, 10*time.Second)
		err := op(ctx)
		cancel()
		if err == nil || l.ctx.Err() != nil {
			return err
		}
		if failures == 0 {
			l.log.Warn(what+" failed, retrying", "session_id", id, "error", err)
		}
		select {
		case <-l.ctx.Done():
			return err
		case <-time.After(min(100*time.Millisecond<<min(failures, 5), 2*time.Second)):
		}
	}
}

// giveUp ends the session of a sidecar that keeps crashing.
func (l *Launcher) giveUp(ctx context.Context, id string, exitCode int, how string) {
	if _, err := reportEnd(ctx, l.cfg.Redis, id, exitCode, how); err != nil {
		// The record stays, marked exited: the next look tries again.
		l.log.Error("session_end for a crashing sidecar not written", "session_id", id, "error", err)
		return
	}
	l.log.Error("sidecar keeps crashing; its session ended", "session_id", id, "exit_code", exitCode, "how", how)
	l.dropUser(ctx, id)
	l.dropSandbox(id)
	if err := l.cfg.Redis.HDel(ctx, l.key, id).Err(); err != nil {
		l.log.Warn("record not removed", "session_id", id, "error", err)
	}
}

// recent keeps the times at or after since.
func recent(times []int64, since int64) []int64 {
	out := times[:0]
	for _, t := range times {
		if t >= since {
			out = append(out, t)
		}
	}
	return out
}

// sessionEnded reports whether the session's last event is session_end.
func sessionEnded(ctx context.Context, rdb *redis.Client, sessionID string) (bool, error) {
	last, err := rdb.XRevRangeN(ctx, protocol.EventsKey(sessionID), "+", "-", 1).Result()
	if err != nil || len(last) == 0 {
		return false, err
	}
	return last[0].Values["type"] == protocol.EventSessionEnd, nil
}

// endIfMissing appends a session_end to a stream whose last entry is not
// one, atomically, so two reporters never write two.
var endIfMissing = redis.NewScript(`
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #last > 0 then
  local f = last[1][2]
  for i = 1, #f, 2 do
    if f[i] == 'type' and f[i + 1] == 'session_end' then return 0 end
  end
end
redis.call('XADD', KEYS[1], '*', 'type', 'session_end', 'data', ARGV[1], 'ts', ARGV[2])
return 1
`)

// reportEnd writes the session_end of a sidecar that keeps dying without
// one and reports whether it had to.
func reportEnd(ctx context.Context, rdb *redis.Client, sessionID string, exitCode int, how string) (bool, error) {
	data, err := json.Marshal(protocol.SessionEnd{
		Status: protocol.StatusError, Reason: protocol.ReasonInfrastructureError,
		FailureReason: protocol.FailureInfrastructureError, ExitCode: exitCode,
		Error: "the sidecar kept exiting without session_end (" + how + ")",
	})
	if err != nil {
		return false, err
	}
	n, err := endIfMissing.Run(ctx, rdb, []string{protocol.EventsKey(sessionID)},
		string(data), strconv.FormatInt(time.Now().UnixMilli(), 10)).Int()
	return n == 1, err
}

// alive reports whether pid is still the sidecar that started at start
// (clock ticks since boot; 0 when unknown).
func alive(pid int, start uint64) bool {
	state, started, err := procStat(pid)
	if errors.Is(err, errNoProc) {
		// No /proc: ask the kernel whether the pid exists.
		err := syscall.Kill(pid, 0)
		return err == nil || errors.Is(err, syscall.EPERM)
	}
	if err != nil {
		return false
	}
	if state == "Z" || state == "X" {
		return false
	}
	return start == 0 || started == start
}

// procStart returns the start time of pid, 0 when unknown.
func procStart(pid int) uint64 {
	_, start, err := procStat(pid)
	if err != nil {
		return 0
	}
	return start
}

var errNoProc = errors.New("no /proc file system")

// procStat reads the state and start time of pid from /proc/<pid>/stat.
func procStat(pid int) (state string, start uint64, err error) {
	fields, err := procStatFields(pid)
	if err != nil {
		return "", 0, err
	}
	// fields[0] is field 3 (state); field 22 (starttime) is fields[19].
	start, err = strconv.ParseUint(fields[19], 10, 64)
	return fields[0], start, err
}

// procGroup reads the process group of pid from /proc/<pid>/stat.
func procGroup(pid int) (int, error) {
	fields, err := procStatFields(pid)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(fields[2]) // field 5 (pgrp)
}

// procStatFields returns the fields of /proc/<pid>/stat from field 3 on.
func procStatFields(pid int) ([]string, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		if _, serr := os.Stat("/proc/self/stat"); serr != nil {
			return nil, errNoProc
		}
		return nil, err
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields that follow start after its last ')'.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, errors.New("unreadable /proc stat")
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return nil, errors.New("short /proc stat")
	}
	return fields, nil
}
