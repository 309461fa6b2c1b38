package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/agentbus/agentbus/sidecar/launcher"
	"github.com/agentbus/agentbus/sidecar/sandbox"
)

// sandboxFlags are the flags of up and of the runtime worker that say how
// sidecars are confined.
type sandboxFlags struct {
	unsandboxed  bool
	maxProcesses int
	maxMemory    string
}

func addSandboxFlags(fs *flag.FlagSet) *sandboxFlags {
	f := &sandboxFlags{}
	off, _ := strconv.ParseBool(os.Getenv("AGENTBUS_UNSANDBOXED"))
	fs.BoolVar(&f.unsandboxed, "unsandboxed", off,
		"run the sidecars, their agents and tools unconfined, as this process's user, with this process's files in reach (default $AGENTBUS_UNSANDBOXED); /readyz then shows \"sandbox\":\"off\"")
	maxProcs := sandbox.DefaultMaxProcesses
	if v, err := strconv.Atoi(os.Getenv("AGENTBUS_SANDBOX_MAX_PROCESSES")); err == nil {
		maxProcs = v
	}
	fs.IntVar(&f.maxProcesses, "sandbox-max-processes", maxProcs,
		"processes one session's sandbox may hold (RLIMIT_NPROC; binds only when agentbus does not run as root; $AGENTBUS_SANDBOX_MAX_PROCESSES)")
	fs.StringVar(&f.maxMemory, "sandbox-max-memory", envOr("AGENTBUS_SANDBOX_MAX_MEMORY", "4GiB"),
		"memory each process of a session's sandbox may allocate (RLIMIT_DATA), such as 4GiB or 512MiB ($AGENTBUS_SANDBOX_MAX_MEMORY)")
	return f
}

// sandboxSettings is how the runtime of a process confines its sidecars.
type sandboxSettings struct {
	// Off runs sidecars unconfined (--unsandboxed).
	Off          bool
	MaxProcesses int
	MaxMemory    int64
	// Reported says that this process runs the runtime, so /readyz shows
	// whether its sidecars are confined.
	Reported bool
}

// settings reads the flags; runsRuntime says whether this process runs
// the runtime worker.
func (f *sandboxFlags) settings(runsRuntime bool) (sandboxSettings, error) {
	mem, err := parseBytes(f.maxMemory)
	if err != nil {
		return sandboxSettings{}, fmt.Errorf("--sandbox-max-memory: %w", err)
	}
	if f.maxProcesses < 1 {
		return sandboxSettings{}, fmt.Errorf("--sandbox-max-processes=%d: want a positive number", f.maxProcesses)
	}
	runsRuntime = runsRuntime && envOr("AGENTBUS_RUNTIME", string(launcher.ModeProcess)) == string(launcher.ModeProcess)
	return sandboxSettings{Off: f.unsandboxed, MaxProcesses: f.maxProcesses, MaxMemory: mem, Reported: runsRuntime}, nil
}

// state is what /readyz shows of the sandbox: "on", "off", or "" when
// this process starts no sidecar.
func (s sandboxSettings) state() string {
	switch {
	case !s.Reported:
		return ""
	case s.Off:
		return "off"
	}
	return "on"
}

// runtimeSandbox returns the sandbox the runtime's sidecars run in, after
// making one for a trivial command: a host where none can be made stops
// the runtime with the cause, never running agents unconfined unless
// --unsandboxed says so. It returns nil when sidecars run unconfined or
// are not this process's to start (external mode).
func runtimeSandbox(ctx context.Context, s sandboxSettings, mode launcher.Mode) (*sandbox.Sandbox, error) {
	if mode == launcher.ModeExternal {
		return nil, nil
	}
	if s.Off {
		slog.Warn("sidecars run unsandboxed (--unsandboxed): agents reach every file and process this user does",
			"component", "runtime")
		return nil, nil
	}
	sb, err := sandbox.New(sandbox.Config{MaxProcesses: s.MaxProcesses, MaxMemory: s.MaxMemory})
	if err == nil {
		err = sb.Check(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("runtime: no sidecar starts: %w; fix it, or pass --unsandboxed (AGENTBUS_UNSANDBOXED=1) to run agents unconfined", err)
	}
	return sb, nil
}

// parseBytes reads a size such as 4GiB, 512MiB, 4G or 1073741824.
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		n      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}}
	v, mul := strings.TrimSpace(s), int64(1)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(v, u.suffix); ok {
			v, mul = strings.TrimSpace(rest), u.n
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%q: want a positive size such as 4GiB or 512MiB", s)
	}
	return n * mul, nil
}
