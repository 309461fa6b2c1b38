// Package launcher is the agent runtime (the seed's IAgentRuntime): it
// starts one sidecar per session and watches it.
//
// In process mode it spawns `agentbus sidecar --session <id> --config
// <file>` on this host, in the session's working directory, with the agent
// API's URL and the session's key in the environment. It records every
// sidecar it runs in Redis (agentbus:launcher:<name>:sidecars), notices a
// sidecar that exits without writing session_end and writes one for it
// (status error, InfrastructureError). A launcher that restarts re-adopts
// the sidecars still running and ends cleanly the sessions of those that
// died meanwhile.
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

// Errors of StartSession and Kill.
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
	// nothing else leaks to the agent (no database URL, for one). Default:
	// PATH, HOME, USER, LANG, LC_ALL, TMPDIR, TZ.
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
	// Logger receives the launcher's log. Default slog.Default(); lines
	// carry component=launcher.
	Logger *slog.Logger
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
		c.InheritEnv = []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ"}
	}
	if c.ConfigDir == "" {
		c.ConfigDir = filepath.Join(os.TempDir(), "agentbus-sidecars")
	}
	if c.Name == "" {
		host, _ := os.Hostname()
		c.Name = host
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 500 * time.Millisecond
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

	mu      sync.Mutex
	running map[string]*sidecarProc
	closed  bool
}

// sidecarProc is a sidecar this launcher watches.
type sidecarProc struct {
	handle Handle
	rec    record
	cmd    *exec.Cmd // nil for an adopted sidecar
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
		key:     "agentbus:launcher:" + cfg.Name + ":sidecars",
		ctx:     ctx,
		stop:    stop,
		running: map[string]*sidecarProc{},
	}, nil
}

// Start takes over the sidecars an earlier run of this launcher recorded:
// it watches those still running and ends the sessions of those that are
// gone (with an InfrastructureError session_end unless they wrote their
// own). In external mode it does nothing.
func (l *Launcher) Start(ctx context.Context) error {
	if l.cfg.Mode == ModeExternal {
		return nil
	}
	recs, err := l.cfg.Redis.HGetAll(ctx, l.key).Result()
	if err != nil {
		return fmt.Errorf("launcher: read records: %w", err)
	}
	for id, raw := range recs {
		var rec record
		if err := json.Unmarshal([]byte(raw), &rec); err != nil {
			l.log.Error("unreadable record dropped", "session_id", id, "error", err)
			_ = l.cfg.Redis.HDel(ctx, l.key, id).Err()
			continue
		}
		p := &sidecarProc{handle: Handle{SessionID: id, RuntimeJobID: rec.RuntimeJobID}, rec: rec}
		if !alive(rec.PID, rec.ProcStart) {
			l.log.Warn("sidecar gone while the launcher was down", "session_id", id, "pid", rec.PID)
			l.gone(p, -1, "the sidecar process was gone when the launcher restarted")
			continue
		}
		l.mu.Lock()
		l.running[id] = p
		l.mu.Unlock()
		l.log.Info("sidecar adopted", "session_id", id, "pid", rec.PID)
		l.wg.Add(1)
		go l.poll(p)
	}
	return nil
}

// Close stops watching. Running sidecars go on; a launcher started later
// with the same name adopts them.
func (l *Launcher) Close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.stop()
	l.wg.Wait()
	return nil
}

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

// Kill ends the session's sidecar and its children at once (SIGKILL to
// its process group), for a hard stop such as an exhausted budget; the
// launcher then reports the session's end as for any dead sidecar.
func (l *Launcher) Kill(sessionID string) error {
	pid, ok := l.PID(sessionID)
	if !ok {
		return ErrNotRunning
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		return syscall.Kill(pid, syscall.SIGKILL)
	}
	return nil
}
