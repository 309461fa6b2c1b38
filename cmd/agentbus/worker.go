package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/outbox"
	cmdhandlers "github.com/agentbus/agentbus/handlers/commands"
	"github.com/agentbus/agentbus/handlers/reactions"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// needs says which connections a worker uses.
type needs uint8

const (
	needPostgres needs = 1 << iota
	needNATS
	needRedis
)

// worker is one kind of worker process. `agentbus worker <name>` runs one
// alone, connected to only what it needs; `agentbus up` runs all of them.
type worker struct {
	// summary is the one line `agentbus worker -h` shows.
	summary string
	// needs are the connections run uses from in.
	needs needs
	// conns is how many Postgres connections run may hold at once.
	conns func() int
	// run works until ctx ends.
	run func(ctx context.Context, in *infra) error
	// consumes are the durable consumers it reads, each defined in
	// nats/consumers/<stream>/<durable>.json (which holds the filters).
	consumes []consumer
	// publishes are the subjects its NATS user may publish on besides the
	// JetStream API, the acks of the streams it consumes and the dead
	// letters of its consumers.
	publishes []string
}

// consumer names a durable consumer of a stream.
type consumer struct{ stream, durable string }

// workers is every worker there is. A new worker is one entry here: up runs
// it, and `agentbus worker <name>` runs it alone. TestWorkersAreDeployed
// names what its entry asks of nats/ and compose.yaml: its consumer
// files, its NATS user with exactly the declared permissions, and its
// compose service.
var workers = map[string]worker{
	"commands": {
		summary: "handle AGENTS_COMMANDS: load, apply, save with the outbox, reply (AGENTBUS_COMMANDS_CONCURRENCY, default 8)",
		needs:   needPostgres | needNATS,
		// One per handler running at once, and one to spare.
		conns:    func() int { n, _ := commandsConcurrency(); return n + 1 },
		run:      runCommandsWorker,
		consumes: []consumer{{bus.StreamCommands, cmdhandlers.Consumer}},
		// Results on the sender's inbox, the events it committed, and the
		// steering message of an event that steers a running session.
		publishes: []string{"_INBOX.>", bus.AllEventsFilter(), bus.SidecarCommandSubject("*", protocol.CommandSteeringMessage)},
	},
	"outbox": {
		summary: "publish the committed outbox rows their writers did not publish to AGENTS_EVENTS",
		needs:   needPostgres | needNATS,
		// The leader's own connection (lock and LISTEN) and one for rounds.
		conns:     func() int { return 2 },
		run:       runOutboxWorker,
		publishes: []string{bus.AllEventsFilter()},
	},
}

// workerNames returns the registered workers' names in order.
func workerNames() []string {
	names := make([]string, 0, len(workers))
	for name := range workers {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// withPoolSize returns the database URL with pool_max_conns = n, unless it
// sets pool_max_conns itself. Without it the pool holds max(4, CPUs)
// connections, and handlers beyond that wait for one: with Postgres
// committing many waiting transactions with one WAL flush, they are better
// off in the database.
func withPoolSize(url string, n int) string {
	if n <= 0 || strings.Contains(url, "pool_max_conns") {
		return url
	}
	size := "pool_max_conns=" + strconv.Itoa(n)
	switch {
	case !strings.Contains(url, "://"):
		return url + " " + size
	case strings.Contains(url, "?"):
		return url + "&" + size
	default:
		return url + "?" + size
	}
}

// poolSize is the connections the named workers hold at most, plus spare.
func poolSize(names ...string) int {
	n := 2
	for _, name := range names {
		if conns := workers[name].conns; conns != nil {
			n += conns()
		}
	}
	return n
}

// defaultCommandsConcurrency is how many commands one commands worker
// handles at once unless AGENTBUS_COMMANDS_CONCURRENCY says otherwise.
const defaultCommandsConcurrency = 8

// commandsConcurrency reads AGENTBUS_COMMANDS_CONCURRENCY.
func commandsConcurrency() (int, error) {
	v := os.Getenv("AGENTBUS_COMMANDS_CONCURRENCY")
	if v == "" {
		return defaultCommandsConcurrency, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("AGENTBUS_COMMANDS_CONCURRENCY=%q: want a positive number", v)
	}
	return n, nil
}

// runCommandsWorker consumes AGENTS_COMMANDS with every command handler.
func runCommandsWorker(ctx context.Context, in *infra) error {
	concurrency, err := commandsConcurrency()
	if err != nil {
		return err
	}
	sessionPool, err := in.sessionPool()
	if err != nil {
		return err
	}
	d := cmdhandlers.NewDispatcher(in.Pool, in.NC, cmdhandlers.Classify)
	cmdhandlers.Register(d, nil, sessionPool)
	forwarder, err := outbox.New(postgres.NewOutbox(in.Pool), in.JS)
	if err != nil {
		return err
	}
	// Steering goes to the sidecar with the event that raised it, not one
	// hop later from the delivery reaction.
	forwarder.Along = reactions.SteeringAlong
	d.ForwardEvents(forwarder)
	return bus.Run(ctx, in.JS, bus.RunnerConfig{
		Stream:      bus.StreamCommands,
		Consumer:    cmdhandlers.Consumer,
		Handler:     d.Handle,
		Concurrency: concurrency,
		Logger:      slog.Default().With("component", "commands"),
	})
}

// runOutboxWorker sweeps the outbox for the events their writers did not
// publish; copies elect one active sweeper.
func runOutboxWorker(ctx context.Context, in *infra) error {
	forwarder, err := outbox.New(postgres.NewOutbox(in.Pool), in.JS)
	if err != nil {
		return err
	}
	return forwarder.Run(ctx)
}

// runWorker is `agentbus worker <name> [flags]`.
func runWorker(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("worker", flag.ExitOnError)
	httpAddr := fs.String("http", envOr("AGENTBUS_WORKER_HTTP", "127.0.0.1:8082"), "listen address of /healthz and /readyz; empty turns them off")
	databaseURL := fs.String("database-url", os.Getenv("DATABASE_URL"), "Postgres, already migrated (default $DATABASE_URL)")
	natsURL := fs.String("nats-url", envOr("NATS_URL", "nats://127.0.0.1:4222"), "NATS servers, comma-separated, from $NATS_URL; streams and consumers are provisioned")
	redisURL := fs.String("redis-url", os.Getenv("REDIS_URL"), "Redis, for workers that use it (default $REDIS_URL)")
	poolMaxArg := poolMaxFlag(fs)
	sandboxArgs := addSandboxFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: agentbus worker <name> [flags]\n\nworkers:\n")
		for _, name := range workerNames() {
			fmt.Fprintf(fs.Output(), "  %-10s %s\n", name, workers[name].summary)
		}
		fmt.Fprintln(fs.Output(), "\nflags:")
		fs.PrintDefaults()
	}
	// The name may come before or after the flags.
	_ = fs.Parse(args)
	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("worker: name the worker to run")
	}
	name := fs.Arg(0)
	_ = fs.Parse(fs.Args()[1:])
	if fs.NArg() > 0 {
		return fmt.Errorf("worker %s: unexpected arguments %s", name, strings.Join(fs.Args(), " "))
	}
	w, ok := workers[name]
	if !ok {
		return fmt.Errorf("worker: unknown worker %q (have %s)", name, strings.Join(workerNames(), ", "))
	}
	log := slog.Default().With("component", "worker", "worker", name)

	switch {
	case w.needs&needPostgres != 0 && *databaseURL == "":
		return errors.New("no Postgres: set DATABASE_URL or --database-url")
	case w.needs&needRedis != 0 && *redisURL == "":
		return errors.New("no Redis: set REDIS_URL or --redis-url")
	}

	in := &infra{}
	defer in.Close()
	var err error
	if in.PoolMax, err = poolMax(*poolMaxArg); err != nil {
		return err
	}
	if in.RunnerCapacity, err = runnerCapacity(os.Getenv("AGENTBUS_RUNNER_CAPACITY")); err != nil {
		return fmt.Errorf("worker %s: AGENTBUS_RUNNER_CAPACITY: %w", name, err)
	}
	if in.Sandbox, err = sandboxArgs.settings(name == "runtime"); err != nil {
		return fmt.Errorf("worker %s: %w", name, err)
	}
	if w.needs&needNATS != 0 {
		if err := in.connectNATSWithEnvReplicas(ctx, *natsURL); err != nil {
			return err
		}
	}
	if w.needs&needPostgres != 0 {
		if err := in.connectPostgres(ctx, withPoolSize(*databaseURL, poolSize(name))); err != nil {
			return err
		}
		in.DatabaseURL = *databaseURL
	}
	if w.needs&needRedis != 0 {
		if err := in.connectRedis(ctx, *redisURL); err != nil {
			return err
		}
	}

	components := []component{{name, func(ctx context.Context) error { return w.run(ctx, in) }}}
	if *httpAddr != "" {
		mux := http.NewServeMux()
		in.Checks().Register(mux)
		reg, err := in.Metrics()
		if err != nil {
			return err
		}
		srv := newHTTPServer(*httpAddr, withMetrics(mux, reg))
		components = append(components, component{"http", func(ctx context.Context) error { return serveHTTP(ctx, srv) }})
	}
	log.Info("worker starting", "http", *httpAddr)
	if err := runComponents(ctx, components); err != nil {
		return fmt.Errorf("worker %s: %w", name, err)
	}
	return nil
}
