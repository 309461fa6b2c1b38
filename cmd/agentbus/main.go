// Command agentbus is the control plane for AI agent sessions: one binary
// whose subcommands run the whole stack (up) or each component alone.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"syscall"
	"time"

	"github.com/agentbus/agentbus/cmd/agentbus/cli"
	"github.com/agentbus/agentbus/internal/tracing"
)

// command is one subcommand of the agentbus binary.
type command struct {
	summary string
	run     func(ctx context.Context, args []string) error
}

var commands = map[string]command{
	"api":     {"serve the HTTP API (DATABASE_URL, NATS_URL; --http)", runAPI},
	"gen":     {"write what running the workers apart needs from their declarations: nats/consumers, nats/users.conf, compose.yaml (--dir)", runGen},
	"migrate": {"apply the database migrations (DATABASE_URL)", runMigrate},
	"openapi": {"print the HTTP API's OpenAPI 3.1 document", runOpenAPI},
	"relay":   {"bridge sidecar Redis streams and JetStream", runRelay},
	"runner":  {"run the sandboxed sidecars placed on this host: runner --name N --capacity C [--data-dir D]", runRunner},
	"runners": {"list the runners: name, capacity, sessions, lease age, draining (--json); runners drain NAME drains one", runRunners},
	"sidecar": {"run one agent session's sidecar", runSidecar},
	"socket":  {"serve the local NDJSON socket for a running deployment (AGENTBUS_API, AGENTBUS_TOKEN)", runSocket},
	"token":   {"print a development bearer token: token --user <id>", runToken},
	"up":      {"run the whole stack in one process, on embedded defaults", runUp},
	"worker":  {"run one worker alone: worker <name> (worker -h lists them)", runWorker},
}

func main() {
	slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel()})))
	if len(os.Args) < 2 || os.Args[1] == "help" || os.Args[1] == "-h" || os.Args[1] == "--help" {
		usage()
		return
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "agentbus: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := withTracing(ctx, os.Args[1], func() error { return cmd.run(ctx, os.Args[2:]) })
	if err != nil {
		// The commands for people say what went wrong in a line, and say
		// by their exit code what kind of failure it was.
		var exit interface{ ExitCode() int }
		if errors.As(err, &exit) {
			fmt.Fprintln(os.Stderr, "agentbus: "+err.Error())
			os.Exit(exit.ExitCode())
		}
		slog.Error("agentbus "+os.Args[1]+" failed", "component", os.Args[1], "error", err)
		os.Exit(1)
	}
}

// traced are the commands that run servers, whose spans are exported when
// an OTLP endpoint is configured (internal/tracing).
var traced = map[string]bool{"api": true, "relay": true, "runner": true, "up": true, "worker": true}

// withTracing runs the command name, with tracing set up for it when it
// is a server; the spans left are flushed when it returns.
func withTracing(ctx context.Context, name string, run func() error) error {
	if !traced[name] {
		return run()
	}
	shutdown, err := tracing.Setup(ctx, "agentbus-"+name)
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	defer func() {
		flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := shutdown(flush); err != nil {
			slog.Warn("spans not flushed", "component", name, "error", err)
		}
	}()
	return run()
}

// logLevel is the least level logged: AGENTBUS_LOG_LEVEL (debug, info,
// warn or error), info when it is unset or unknown. `make run` sets warn,
// so that what up prints for people is not lost among the records.
func logLevel() slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(os.Getenv("AGENTBUS_LOG_LEVEL"))); err != nil {
		return slog.LevelInfo
	}
	return l
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: agentbus <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", name, commands[name].summary)
	}
	fmt.Fprint(os.Stderr, "\n"+cli.ExitCodesHelp)
}
