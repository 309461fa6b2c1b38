package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentbus/agentbus/sidecar/protocol"
)

// StartSession starts the sidecar of cfg.SessionID with the session's
// agent API key (StartSessionAsync of the seed's IAgentRuntime).
func (l *Launcher) StartSession(ctx context.Context, cfg protocol.Config, apiKey string) (Handle, error) {
	id := cfg.SessionID
	if !protocol.ValidSessionID(id) {
		return Handle{}, fmt.Errorf("launcher: session id %q may hold only a-z, 0-9, '-' and '_'", id)
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return Handle{}, fmt.Errorf("launcher: %w", err)
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return Handle{}, fmt.Errorf("launcher: %w", err)
	}
	if l.cfg.Mode == ModeExternal {
		if err := l.cfg.Redis.Set(ctx, protocol.ConfigKey(id), raw, 0).Err(); err != nil {
			return Handle{}, fmt.Errorf("launcher: store the config: %w", err)
		}
		return Handle{SessionID: id, RuntimeJobID: "external:" + id}, nil
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
	case l.running[id] != nil:
		return Handle{}, ErrAlreadyRunning
	}
	if err := os.MkdirAll(l.cfg.ConfigDir, 0o700); err != nil {
		return Handle{}, fmt.Errorf("launcher: %w", err)
	}
	file := filepath.Join(l.cfg.ConfigDir, id+".json")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		return Handle{}, fmt.Errorf("launcher: write the config: %w", err)
	}
	cmd, closeOutput, err := l.command(id, file, cfg.WorkingDirectory, apiKey)
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
		PID:          pid, ProcStart: procStart(pid), ConfigFile: file, StartedAt: started,
	}
	p := &sidecarProc{handle: Handle{SessionID: id, RuntimeJobID: rec.RuntimeJobID}, rec: rec, cmd: cmd}
	if err := l.store(ctx, id, rec); err != nil {
		// Untracked, the sidecar could not be watched across a restart.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = cmd.Wait()
		_ = os.Remove(file)
		return Handle{}, err
	}
	l.running[id] = p
	go l.wait(p)
	l.log.Info("sidecar started", "session_id", id, "pid", pid, "runtime_job_id", rec.RuntimeJobID)
	return p.handle, nil
}

// command builds the sidecar's command; closeOutput closes this process's
// copy of the sidecar's log file once the child holds it.
func (l *Launcher) command(id, file, dir, apiKey string) (*exec.Cmd, func(), error) {
	args := append(append([]string(nil), l.cfg.Args...), "--session", id, "--config", file)
	cmd := exec.Command(l.cfg.Binary, args...)
	cmd.Dir = dir
	env := make([]string, 0, len(l.cfg.InheritEnv)+len(l.cfg.Env)+3)
	for _, name := range l.cfg.InheritEnv {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	env = append(env, "REDIS_URL="+l.cfg.RedisURL, "AGENTBUS_API_URL="+l.cfg.APIURL, "AGENTBUS_SESSION_KEY="+apiKey)
	cmd.Env = append(env, l.cfg.Env...)
	// Its own process group: a signal to the launcher's group (Ctrl-C)
	// does not reach it, and Kill reaches its children too. It outlives the
	// launcher, which re-adopts it after a restart.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
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

func (l *Launcher) store(ctx context.Context, id string, rec record) error {
	raw, _ := json.Marshal(rec)
	if err := l.cfg.Redis.HSet(ctx, l.key, id, raw).Err(); err != nil {
		return fmt.Errorf("launcher: record the sidecar: %w", err)
	}
	return nil
}

// wait waits for a child sidecar to exit.
func (l *Launcher) wait(p *sidecarProc) {
	_ = p.cmd.Wait()
	st := p.cmd.ProcessState
	l.gone(p, st.ExitCode(), st.String())
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
				l.gone(p, -1, "the adopted sidecar process is gone")
				return
			}
		}
	}
}

// gone handles a sidecar that exited: unless it wrote session_end, one is
// written for it. A closed launcher leaves this to its successor.
func (l *Launcher) gone(p *sidecarProc, exitCode int, how string) {
	id := p.handle.SessionID
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	if l.running[id] == p {
		delete(l.running, id)
	}
	l.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wrote, err := reportEnd(ctx, l.cfg.Redis, id, exitCode, how)
	switch {
	case err != nil:
		// The record stays: the next Start tries again.
		l.log.Error("session_end for a dead sidecar not written", "session_id", id, "error", err)
		return
	case wrote:
		l.log.Warn("sidecar exited without session_end; reported", "session_id", id, "exit_code", exitCode, "how", how)
	default:
		l.log.Info("sidecar exited", "session_id", id, "exit_code", exitCode)
	}
	if err := l.cfg.Redis.HDel(ctx, l.key, id).Err(); err != nil {
		l.log.Warn("record not removed", "session_id", id, "error", err)
	}
	if p.rec.ConfigFile != "" {
		_ = os.Remove(p.rec.ConfigFile)
	}
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

// reportEnd writes the session_end of a sidecar that died without one and
// reports whether it had to.
func reportEnd(ctx context.Context, rdb *redis.Client, sessionID string, exitCode int, how string) (bool, error) {
	data, err := json.Marshal(protocol.SessionEnd{
		Status: protocol.StatusError, Reason: protocol.ReasonInfrastructureError,
		FailureReason: protocol.FailureInfrastructureError, ExitCode: exitCode,
		Error: "the sidecar exited without session_end (" + how + ")",
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
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		if _, serr := os.Stat("/proc/self/stat"); serr != nil {
			return "", 0, errNoProc
		}
		return "", 0, err
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields that follow start after its last ')'.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", 0, errors.New("unreadable /proc stat")
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is field 3 (state); field 22 (starttime) is fields[19].
	if len(fields) < 20 {
		return "", 0, errors.New("short /proc stat")
	}
	start, err = strconv.ParseUint(fields[19], 10, 64)
	return fields[0], start, err
}
