// Package launcher is the agent runtime (the seed's IAgentRuntime): it
// starts one sidecar per session and watches it.
//
// In process mode it spawns `agentbus sidecar --session <id> --config
// <file>` on this host, in the session's working directory, with an
// allow-listed environment: the agent API's URL, the session's key and the
// engine's settings, never the server's secrets. It records every sidecar
// it runs in Redis (agentbus:launcher:<name>:sidecars). A sidecar that exits
// without ending its session (a crash, kill -9, a signal) keeps its record,
// marked exited, so that its runtime starts it again; one that crashes too
// often has its session ended for it (status error, InfrastructureError).
// Each sidecar runs in its session's sandbox (package sandbox) unless
// Config.Sandbox is nil. A launcher killed takes its sidecars with it (an
// unsandboxed one suspends on the SIGTERM the kernel sends it; a sandboxed
// one dies with its bwrap, which that SIGTERM ends); their exits do not
// count as crashes.
// Close stops every sidecar and keeps their records: the launcher's next
// run starts them again, and they resume their agents. A launcher that
// restarts after being killed re-adopts the sidecars still running.
//
// In external mode it starts nothing: it leaves the composed config under
// agent:session:{<id>}:config for a sidecar someone else runs, and agentbus
// only speaks the Redis contract with it.
package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentbus/agentbus/sidecar/protocol"
	"github.com/agentbus/agentbus/sidecar/sandbox"
)

// Mode says how sidecars are run.
type Mode string

// Modes.
const (
	// ModeProcess spawns each sidecar as a local process.
	ModeProcess Mode = "process"
	// ModeExternal starts nothing; sidecars are run by someone else.
	ModeExternal Mode = "external"
)

// DefaultInheritEnv are the variables a sidecar inherits by default: what
// a process needs to run, and the engines' own settings (the claude
// engine's binary, model endpoint and key).
var DefaultInheritEnv = []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ",
	"ANTHROPIC_*", "AGENTBUS_CLAUDE_*", "CLAUDE_CODE_*", "DISABLE_TELEMETRY", "DISABLE_AUTOUPDATER", "DISABLE_ERROR_REPORTING"}

// Errors of StartSession and Stop.
var (
	ErrAlreadyRunning = errors.New("launcher: the session's sidecar is already running")
	ErrNotRunning     = errors.New("launcher: no sidecar of this launcher runs the session")
	ErrClosed         = errors.New("launcher: closed")
)

// Config configures a Launcher.
type Config struct {
	// Mode is process (default) or external.
	Mode Mode
	// Redis holds the sessions' streams and the launcher's records. Required.
	Redis *redis.Client
	// RedisURL is the REDIS_URL handed to sidecars. Required in process mode.
	RedisURL string
	// Binary is the agentbus binary. Default: this process's executable.
	Binary string
	// Args come before --session and --config. Default: ["sidecar"].
	Args []string
	// APIURL is the agent API's base URL handed to sidecars
	// (AGENTBUS_API_URL); empty when there is none.
	APIURL string
	// Env holds extra "NAME=value" variables for every sidecar, such as
	// ANTHROPIC_API_KEY for the claude engine.
	Env []string
	// InheritEnv names the variables of this process a sidecar inherits;
	// a name ending in "*" is a prefix. Nothing else reaches the agent (no
	// database URL or token secret, for one). Default: DefaultInheritEnv.
	InheritEnv []string
	// ConfigDir receives each session's config file (mode 0600), removed
	// when the sidecar is gone. Default: <temp dir>/agentbus-sidecars.
	ConfigDir string
	// LogDir receives each sidecar's output as <session id>.log. Default:
	// the sidecar writes to this process's standard error.
	LogDir string
	// Name identifies this launcher's records; a restarted launcher with
	// the same name re-adopts them. Default: the host name.
	Name string
	// PollInterval is how often an adopted sidecar (not a child of this
	// process) is checked for life. Default 500ms.
	PollInterval time.Duration
	// StopGrace is how long Stop and Close wait for a sidecar to exit after
	// SIGTERM before they kill its process group. Default 3s.
	StopGrace time.Duration
	// MaxCrashes is how many times a session's sidecar may exit without
	// ending its session within CrashWindow before the launcher ends the
	// session for it. Default 3 in 2 minutes.
	MaxCrashes  int
	CrashWindow time.Duration
	// Sandbox confines each sidecar it starts in process mode, its agent
	// and their tools (see package sandbox). Nil runs them unconfined, as
	// this process's user, with a warning at every start.
	Sandbox *sandbox.Sandbox
	// SandboxDir keeps each session's sandbox home and temporary
	// directories in <SandboxDir>/<session id>, across restarts of its
	// sidecar; they are removed when the session is over. Default:
	// <temp dir>/agentbus-sandboxes.
	SandboxDir string
	// CheckpointDir keeps each session's checkpoint store, a bare git
	// repository <CheckpointDir>/<session id>.git, which the sidecar
	// writes at the end of every turn (bound read-write into its sandbox)
	// and which outlives the session, for forks. Empty: no checkpoints.
	CheckpointDir string
	// CheckpointRetention is how many checkpoints, and of what age, each
	// session's store keeps (the sidecar prunes the others); zero keeps
	// them all.
	CheckpointRetention CheckpointRetention
	// SandboxPrograms names variables of a sidecar's environment that hold
	// the path of a program its engine runs (the claude CLI): the program,
	// symbolic links followed, is bound read-only into the sandbox, and the
	// variable names it there.
	SandboxPrograms []string
	// Logger receives the launcher's log. Default slog.Default(); lines
	// carry component=launcher.
	Logger *slog.Logger
	// PlacedRedisUsers says that whoever places the sessions makes their
	// sidecars' Redis users and hands each start its URL (WithRedisURL):
	// the launcher then neither makes, restores nor removes them, for a
	// session it ran may run elsewhere now, under the same user.
	PlacedRedisUsers bool
}

func (c *Config) setDefaults() {
	if c.Mode == "" {
		c.Mode = ModeProcess
	}
	if c.Binary == "" {
		if exe, err := os.Executable(); err == nil {
			c.Binary = exe
		}
	}
	if c.Args == nil {
		c.Args = []string{"sidecar"}
	}
	if c.InheritEnv == nil {
		c.InheritEnv = DefaultInheritEnv
	}
	if c.ConfigDir == "" {
		c.ConfigDir = filepath.Join(os.TempDir(), "agentbus-sidecars")
	}
	if c.SandboxDir == "" {
		c.SandboxDir = filepath.Join(os.TempDir(), "agentbus-sandboxes")
	}
	if c.Name == "" {
		host, _ := os.Hostname()
		c.Name = host
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 500 * time.Millisecond
	}
	if c.StopGrace <= 0 {
		c.StopGrace = 3 * time.Second
	}
	if c.MaxCrashes <= 0 {
		c.MaxCrashes = 3
	}
	if c.CrashWindow <= 0 {
		c.CrashWindow = 2 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports a configuration the launcher cannot run with.
func (c Config) Validate() error {
	switch {
	case c.Redis == nil:
		return errors.New("launcher: Config.Redis is required")
	case c.Mode != ModeProcess && c.Mode != ModeExternal:
		return fmt.Errorf("launcher: mode %q is neither process nor external", c.Mode)
	case c.Mode == ModeProcess && c.RedisURL == "":
		return errors.New("launcher: Config.RedisURL is required in process mode")
	case c.Mode == ModeProcess && c.Binary == "":
		return errors.New("launcher: Config.Binary is required in process mode")
	case c.Name == "" || strings.ContainsAny(c.Name, " {}"):
		return fmt.Errorf("launcher: Config.Name %q is empty or holds a space or brace", c.Name)
	}
	return nil
}

// Handle identifies a running sidecar (the seed's AgentProcessHandle).
type Handle struct {
	// SessionID is the session the sidecar runs.
	SessionID string
	// RuntimeJobID identifies the sidecar: "process:<launcher>:<pid>:<start
	// unix ms>" in process mode, "external:<session id>" in external mode.
	// Store it with the session.
	RuntimeJobID string
}

// Launcher starts and watches sidecars.
type Launcher struct {
	cfg  Config
	log  *slog.Logger
	key  string
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	// exits is signalled when a sidecar exited without ending its session.
	exits chan struct{}

	mu      sync.Mutex
	running map[string]*sidecarProc
	closed  bool
}

// sidecarProc is a sidecar this launcher watches.
type sidecarProc struct {
	handle Handle
	rec    record
	cmd    *exec.Cmd // nil for an adopted sidecar
	// stopping is set by Stop: the session is over, its record goes.
	stopping bool
	// gone is closed once the process has exited and was handled.
	gone chan struct{}
}

// record is what Redis keeps about a running sidecar.
type record struct {
	RuntimeJobID string `json:"runtime_job_id"`
	PID          int    `json:"pid"`
	// ProcStart is the process's start time in clock ticks since boot
	// (from /proc), so a reused pid is not mistaken for the sidecar.
	ProcStart  uint64 `json:"proc_start,omitempty"`
	ConfigFile string `json:"config_file,omitempty"`
	StartedAt  int64  `json:"started_at"`
	// Exited is set when the sidecar exited without ending its session:
	// the runtime starts it again.
	Exited bool `json:"exited,omitempty"`
	// Crashes are the unix ms times of its recent exits without an end.
	Crashes []int64 `json:"crashes,omitempty"`
	// Sandboxed is set when the process is bwrap around the sidecar: a
	// SIGTERM then goes to the sidecar and the processes it started, not
	// to bwrap, which would kill them all at once.
	Sandboxed bool `json:"sandboxed,omitempty"`
	// Attempt is the run of its session the sidecar serves
	// (protocol.Config.Attempt).
	Attempt int `json:"attempt,omitempty"`
	// RedisPasswordSHA256 is the hash of its Redis user's password, to
	// restore the user should Redis lose it.
	RedisPasswordSHA256 string `json:"redis_password_sha256,omitempty"`
}

// New returns a launcher; call Start before starting sessions.
func New(cfg Config) (*Launcher, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Launcher{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "launcher", "launcher", cfg.Name),
		key:     RecordsKey(cfg.Name),
		ctx:     ctx,
		stop:    stop,
		running: map[string]*sidecarProc{},
		exits:   make(chan struct{}, 1),
	}, nil
}

// Start takes over the sidecars an earlier run of this launcher recorded:
// it watches those still running and marks exited those that are gone, so
// that the runtime starts them again. In external mode it does nothing.
func (l *Launcher) Start(ctx context.Context) error {
	if l.cfg.Mode == ModeExternal {
		return nil
	}
	recs, err := l.records(ctx)
	if err != nil {
		return err
	}
	if !l.cfg.PlacedRedisUsers {
		l.wg.Add(1)
		go l.keepRedisUsers()
	}
	for id, rec := range recs {
		p := &sidecarProc{handle: Handle{SessionID: id, RuntimeJobID: rec.RuntimeJobID}, rec: rec, gone: make(chan struct{})}
		if rec.Exited {
			continue
		}
		if !alive(rec.PID, rec.ProcStart) {
			l.log.Warn("sidecar gone while the launcher was down", "session_id", id, "pid", rec.PID)
			l.exited(p, -1, "the sidecar process was gone when the launcher restarted", false)
			continue
		}
		l.mu.Lock()
		l.running[id] = p
		Live.Inc()
		l.mu.Unlock()
		l.log.Info("sidecar adopted", "session_id", id, "pid", rec.PID)
		l.wg.Add(1)
		go l.poll(p)
	}
	return nil
}

// records reads this launcher's records; an unreadable one is dropped.
func (l *Launcher) records(ctx context.Context) (map[string]record, error) {
	raw, err := l.cfg.Redis.HGetAll(ctx, l.key).Result()
	if err != nil {
		return nil, fmt.Errorf("launcher: read records: %w", err)
	}
	out := make(map[string]record, len(raw))
	for id, r := range raw {
		var rec record
		if err := json.Unmarshal([]byte(r), &rec); err != nil {
			l.log.Error("unreadable record dropped", "session_id", id, "error", err)
			if err := l.cfg.Redis.HDel(ctx, l.key, id).Err(); err != nil {
				return nil, fmt.Errorf("launcher: drop a record: %w", err)
			}
			continue
		}
		out[id] = rec
	}
	return out, nil
}

// Exited returns the sessions whose sidecar exited without ending its
// session and is not running again yet: the runtime starts each again, or
// forgets it when its session is over.
func (l *Launcher) Exited(ctx context.Context) ([]string, error) {
	if l.cfg.Mode == ModeExternal {
		return nil, nil
	}
	recs, err := l.records(ctx)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for id, rec := range recs {
		if rec.Exited && l.running[id] == nil {
			out = append(out, id)
		}
	}
	return out, nil
}

// Exits is signalled when a sidecar exited without ending its session, so
// the runtime need not wait for its next look at Exited.
func (l *Launcher) Exits() <-chan struct{} { return l.exits }

// Forget drops the record of a session whose sidecar is not running, so it
// is not started again: its session is over.
func (l *Launcher) Forget(ctx context.Context, sessionID string) error {
	l.mu.Lock()
	running := l.running[sessionID] != nil
	l.mu.Unlock()
	if running {
		return nil
	}
	if l.cfg.Mode == ModeExternal {
		l.dropUser(ctx, sessionID)
		return l.cfg.Redis.Del(ctx, LaunchKey(sessionID)).Err()
	}
	n, err := l.cfg.Redis.HDel(ctx, l.key, sessionID).Result()
	if n > 0 {
		l.dropUser(ctx, sessionID)
	}
	l.dropSandbox(sessionID)
	return err
}

// dropUser removes the session's Redis user, unless users are placed.
func (l *Launcher) dropUser(ctx context.Context, sessionID string) {
	if !l.cfg.PlacedRedisUsers {
		l.dropRedisUser(ctx, sessionID)
	}
}

// Close stops every sidecar this launcher runs (SIGTERM, then SIGKILL to
// the process groups still there after StopGrace) and stops watching. The
// sidecars' records stay, marked exited: a launcher started later with the
// same name starts them again, and they resume their agents.
func (l *Launcher) Close() error {
	l.mu.Lock()
	l.closed = true
	procs := make([]*sidecarProc, 0, len(l.running))
	for _, p := range l.running {
		procs = append(procs, p)
	}
	l.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.terminate(p)
		}()
	}
	wg.Wait()
	l.stop()
	l.wg.Wait()
	return nil
}

// Stop ends the sidecar of a session that is over: SIGTERM to its process
// group (in a sandbox, to every process of the group but bwrap, whose death
// kills the sandbox at once), SIGKILL after StopGrace. Its record goes. It returns once the
// process has exited, and ErrNotRunning when none runs the session.
func (l *Launcher) Stop(sessionID string) error {
	l.mu.Lock()
	p := l.running[sessionID]
	if p != nil {
		p.stopping = true
	}
	l.mu.Unlock()
	if p == nil {
		return ErrNotRunning
	}
	l.terminate(p)
	return nil
}

// terminate signals p's process group to exit and waits for it, killing
// it after StopGrace.
func (l *Launcher) terminate(p *sidecarProc) {
	pid := p.rec.PID
	if p.rec.Sandboxed {
		signalGroupBut(pid, syscall.SIGTERM)
	} else if err := syscall.Kill(-pid, syscall.SIGTERM); err != nil {
		_ = syscall.Kill(pid, syscall.SIGTERM) // not a group leader (adopted from an older launcher)
	}
	select {
	case <-p.gone:
		return
	case <-time.After(l.cfg.StopGrace):
	}
	l.log.Warn("sidecar did not exit after SIGTERM; killed", "session_id", p.handle.SessionID, "pid", pid)
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	select {
	case <-p.gone:
	case <-time.After(l.cfg.StopGrace):
		l.log.Error("sidecar still there after SIGKILL", "session_id", p.handle.SessionID, "pid", pid)
	}
}

// Process reports whether the launcher runs sidecars itself (process
// mode), so that it knows which ones live.
func (l *Launcher) Process() bool { return l.cfg.Mode == ModeProcess }

// Running returns the handles of the sidecars this launcher watches.
func (l *Launcher) Running() []Handle {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Handle, 0, len(l.running))
	for _, p := range l.running {
		out = append(out, p.handle)
	}
	return out
}

// Attempt returns the run of its session that the session's running
// sidecar serves (protocol.Config.Attempt).
func (l *Launcher) Attempt(sessionID string) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.running[sessionID]
	if !ok {
		return 0, false
	}
	return p.rec.Attempt, true
}

// PID returns the process id of the session's sidecar.
func (l *Launcher) PID(sessionID string) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.running[sessionID]
	if !ok {
		return 0, false
	}
	return p.rec.PID, true
}

// CheckpointRetention is a retention policy of checkpoints.
type CheckpointRetention struct {
	// Keep is how many of a session's newest checkpoints are kept; 0: any.
	Keep int
	// MaxAge prunes checkpoints taken longer ago; 0: any age.
	MaxAge time.Duration
}

// CheckpointStore returns the host path of the session's checkpoint store,
// "" when the launcher keeps none.
func (l *Launcher) CheckpointStore(sessionID string) string {
	if l.cfg.CheckpointDir == "" || l.cfg.Mode != ModeProcess || !protocol.ValidSessionID(sessionID) {
		return ""
	}
	dir, err := filepath.Abs(filepath.Join(l.cfg.CheckpointDir, sessionID+".git"))
	if err != nil {
		return ""
	}
	return dir
}
