package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/handlers/reactions"
	"github.com/agentbus/agentbus/internal/credentials"
	"github.com/agentbus/agentbus/sidecar/engine/claude"
	"github.com/agentbus/agentbus/sidecar/launcher"
	"github.com/agentbus/agentbus/sidecar/runners"
)

// sidecarMemory is the memory a sidecar is counted at when a runner's
// capacity is not given: the machine's memory over it.
const sidecarMemory = 64 << 20

// machineCapacity is how many sidecars this machine holds: its memory at
// sidecarMemory each, at least one.
func machineCapacity() int {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 16
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				return max(1, int(kb<<10/sidecarMemory))
			}
		}
	}
	return 16
}

// runnerCapacity reads a runner's capacity: a number of sidecars, or ""
// for what the machine holds.
func runnerCapacity(v string) (int, error) {
	if v == "" {
		return machineCapacity(), nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("runner capacity %q: want a number of sidecars, 0 or more", v)
	}
	return n, nil
}

// leaseTTL reads AGENTBUS_RUNNER_LEASE_TTL, how long a runner's lease
// lasts without a renewal.
func leaseTTL() (time.Duration, error) {
	v := os.Getenv("AGENTBUS_RUNNER_LEASE_TTL")
	if v == "" {
		return runners.DefaultLeaseTTL, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Second {
		return 0, fmt.Errorf("AGENTBUS_RUNNER_LEASE_TTL=%q: want a duration of a second or more", v)
	}
	return d, nil
}

// defaultDrainTimeout bounds the drain of a runner stopped with SIGTERM:
// a session mid-turn longer than that is stopped and resumes elsewhere,
// as after a crash. A deployment gives the runner longer than this to
// stop before it kills it (compose.yaml's stop_grace_period).
const defaultDrainTimeout = time.Minute

// envDuration reads the duration in the environment variable name, or
// def when it is unset or unreadable.
func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d >= 0 {
		return d
	}
	return def
}

// runnerDirs are where a runner keeps its sidecars' files.
type runnerDirs struct{ configs, logs, sandboxes, checkpoints string }

// dirsOf returns the directories of the runner named name in dataDir: the
// runner of up keeps up's own, another runner a directory of its own, so
// that two on one machine never take each other's sandboxes; the
// checkpoint stores are shared, for a session that moves between them.
func dirsOf(dataDir, name string, ofUp bool) runnerDirs {
	base := dataDir
	if !ofUp {
		base = filepath.Join(dataDir, "runners", name)
	}
	return runnerDirs{configs: filepath.Join(base, "sidecars"), logs: filepath.Join(base, "log", "sidecars"),
		sandboxes: filepath.Join(base, "sandboxes"), checkpoints: filepath.Join(dataDir, "checkpoints")}
}

// newLauncher returns the launcher of a runner's sidecars.
func newLauncher(ctx context.Context, in *infra, mode launcher.Mode, name string, dirs runnerDirs) (*launcher.Launcher, error) {
	sb, err := runtimeSandbox(ctx, in.Sandbox, mode)
	if err != nil {
		return nil, err
	}
	retention, err := checkpointRetention()
	if err != nil {
		return nil, err
	}
	engine := os.Getenv("AGENTBUS_ENGINE")
	return launcher.New(launcher.Config{
		Mode: mode, Redis: in.Redis, RedisURL: in.RedisURL, Name: name,
		APIURL: envOr("AGENTBUS_API_URL", in.APIURL), Env: engineEnv(engine),
		LogDir: dirs.logs, ConfigDir: dirs.configs,
		Sandbox: sb, SandboxDir: dirs.sandboxes, SandboxPrograms: []string{claude.EnvBinary},
		CheckpointDir: dirs.checkpoints, CheckpointRetention: retention, PlacedRedisUsers: mode == launcher.ModeProcess,
	})
}

// runRuntimeWorker runs the runtime: the placer of the sessions on the
// runners and, unless its capacity is 0, a runner of this host.
func runRuntimeWorker(ctx context.Context, in *infra) error {
	dataDir, err := in.dataDir()
	if err != nil {
		return err
	}
	mode := launcher.Mode(envOr("AGENTBUS_RUNTIME", string(launcher.ModeProcess)))
	l, err := newLauncher(ctx, in, mode, "", dirsOf(dataDir, "", true))
	if err != nil {
		return err
	}
	ws, err := in.workspace()
	if err != nil {
		return err
	}
	client, err := commandClient(in)
	if err != nil {
		return err
	}
	rt := reactions.Runtime{JS: in.JS, DB: in.Pool, Redis: in.Redis, Launcher: l, Client: client,
		Engine: os.Getenv("AGENTBUS_ENGINE"), Workspace: ws}
	if mode == launcher.ModeExternal {
		return rt.Run(ctx)
	}
	ttl, err := leaseTTL()
	if err != nil {
		return err
	}
	store, err := runners.Open(ctx, in.JS, ttl)
	if err != nil {
		return err
	}
	rt.Placement = &reactions.Placement{Store: store, RedisURL: in.RedisURL}
	components := []component{{"placer", rt.Run}}
	if in.RunnerCapacity > 0 {
		host, _ := os.Hostname()
		r := &runners.Runner{Name: host, Capacity: in.RunnerCapacity, Store: store, Launcher: l}
		components = append(components, component{"runner " + host, r.Run})
	}
	return runComponents(ctx, components)
}

// runRunner is `agentbus runner --name N --capacity C [--data-dir D]`.
func runRunner(ctx context.Context, args []string) error {
	return runRunnerWith(ctx, args, processSidecars)
}

// sidecarsOf returns what starts the sidecars of the runner named name.
type sidecarsOf func(ctx context.Context, in *infra, name string) (runners.Sidecars, error)

// processSidecars starts each sidecar as a process of its own, with a
// launcher: what every runner does.
func processSidecars(ctx context.Context, in *infra, name string) (runners.Sidecars, error) {
	dataDir, err := in.dataDir()
	if err != nil {
		return nil, err
	}
	l, err := newLauncher(ctx, in, launcher.ModeProcess, name, dirsOf(dataDir, name, false))
	if err != nil {
		return nil, err
	}
	return l, nil
}

// runRunnerWith runs `agentbus runner args...` with its sidecars started
// by sidecars.
func runRunnerWith(ctx context.Context, args []string, sidecars sidecarsOf) error {
	fs := flag.NewFlagSet("runner", flag.ExitOnError)
	name := fs.String("name", os.Getenv("AGENTBUS_RUNNER_NAME"), "the runner's name, unique in the fleet (default the host name)")
	capacity := fs.String("capacity", os.Getenv("AGENTBUS_RUNNER_CAPACITY"), "how many sidecars it runs at most (default what the machine holds)")
	dataDir := fs.String("data-dir", "", "the data directory of an `agentbus up` on this machine: its servers' URLs and credentials are read from there")
	natsURL := fs.String("nats-url", os.Getenv("NATS_URL"), "NATS (default $NATS_URL)")
	redisURL := fs.String("redis-url", os.Getenv("REDIS_URL"), "Redis (default $REDIS_URL)")
	apiURL := fs.String("api-url", envOr("AGENTBUS_API_URL", "http://127.0.0.1:8080"), "the agent API the sidecars call")
	drain := fs.Duration("drain-timeout", envDuration("AGENTBUS_RUNNER_DRAIN_TIMEOUT", defaultDrainTimeout),
		"on SIGTERM, how long the runner drains (its sessions move to other runners between their turns) before it stops the sidecars still here")
	sandboxArgs := addSandboxFlags(fs)
	_ = fs.Parse(args)
	if *name == "" {
		*name, _ = os.Hostname()
	}
	n, err := runnerCapacity(*capacity)
	if err != nil {
		return err
	}
	in := &infra{APIURL: *apiURL, DataDir: *dataDir}
	defer in.Close()
	if *dataDir != "" {
		env, err := credentials.ReadEnv(*dataDir)
		if err != nil {
			return fmt.Errorf("runner: %w", err)
		}
		*natsURL, *redisURL = env["NATS_URL"], env["REDIS_URL"]
		if v := env["AGENTBUS_API_URL"]; v != "" && os.Getenv("AGENTBUS_API_URL") == "" {
			in.APIURL = v
		}
	}
	if *natsURL == "" || *redisURL == "" {
		return errors.New("runner: no NATS or Redis: give --data-dir, or --nats-url and --redis-url")
	}
	if in.Sandbox, err = sandboxArgs.settings(true); err != nil {
		return fmt.Errorf("runner: %w", err)
	}
	if err := in.connectNATSWithEnvReplicas(ctx, *natsURL); err != nil {
		return err
	}
	if err := in.connectRedis(ctx, *redisURL); err != nil {
		return err
	}
	return runOn(ctx, in, *name, n, *drain, sidecars)
}

// runOn runs the runner named name with in's connections.
func runOn(ctx context.Context, in *infra, name string, capacity int, drain time.Duration, sidecars sidecarsOf) error {
	ttl, err := leaseTTL()
	if err != nil {
		return err
	}
	store, err := runners.Open(ctx, in.JS, ttl)
	if err != nil {
		return err
	}
	l, err := sidecars(ctx, in, name)
	if err != nil {
		return err
	}
	r := &runners.Runner{Name: name, Capacity: capacity, Store: store, Launcher: l, DrainTimeout: drain}
	return r.Run(ctx)
}

// runnerPlaces returns where the API finds the sessions' runners.
func runnerPlaces(ctx context.Context, js jetstream.JetStream) (*runners.Store, error) {
	ttl, err := leaseTTL()
	if err != nil {
		return nil, err
	}
	return runners.Open(ctx, js, ttl)
}
