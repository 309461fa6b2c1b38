// Package cli is agentbus's command line for people: `agentbus sessions`
// and `agentbus pool`. It is a client of the public HTTP API only, at
// $AGENTBUS_API with $AGENTBUS_TOKEN, printing tables for people and,
// with --json, the API's own JSON for scripts.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/agentbus/agentbus/internal/client"
)

// DefaultAPI is where `agentbus up` serves the API unless told otherwise.
const DefaultAPI = "http://127.0.0.1:8080"

// Exit codes of the commands of this package. Scripts tell the outcomes
// apart by them; ExitCodesHelp describes them.
const (
	// ExitFailure: the API failed (5xx), could not be reached, or
	// answered what it does not document.
	ExitFailure = 1
	// ExitUsage: the command line is wrong.
	ExitUsage = 2
	// ExitNotFound: no such session or message, or not the caller's (404).
	ExitNotFound = 3
	// ExitConflict: the session's status forbids it (409).
	ExitConflict = 4
	// ExitInvalid: the input is invalid (422, 400).
	ExitInvalid = 5
	// ExitUnauthorized: no token, or one the API refuses (401, 403).
	ExitUnauthorized = 6
)

// ExitCodesHelp describes the exit codes, for the help texts.
const ExitCodesHelp = `exit codes of sessions and pool:
  0  success
  1  the API failed (5xx) or could not be reached
  2  usage: unknown subcommand, missing argument, bad flag
  3  not found: no such session or message, or not yours (404)
  4  conflict: the session's status forbids it (409)
  5  invalid input (422)
  6  unauthorized: no token, or one the API refuses (401, 403)
`

// Error is a failure of a command with the exit code it ends with.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// ExitCode is the process's exit code for this failure.
func (e *Error) ExitCode() int { return e.Code }

func usageError(format string, args ...any) error {
	return &Error{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// exitCodeOf maps an error of the API to its exit code.
func exitCodeOf(err error) int {
	switch status := client.StatusOf(err); {
	case status == http.StatusNotFound:
		return ExitNotFound
	case status == http.StatusConflict:
		return ExitConflict
	case status == http.StatusUnprocessableEntity, status == http.StatusBadRequest:
		return ExitInvalid
	case status == http.StatusUnauthorized, status == http.StatusForbidden:
		return ExitUnauthorized
	default:
		return ExitFailure
	}
}

// apiError gives an error of the API its exit code.
func apiError(err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Code: exitCodeOf(err), Err: err}
}

// env is what every subcommand runs with: where to write, which API, and
// the flags they all take.
type env struct {
	ctx      context.Context
	out, err io.Writer
	api      string
	token    string
	json     bool
	client   *client.Client
}

func newEnv(ctx context.Context, stdout, stderr io.Writer) *env {
	return &env{ctx: ctx, out: stdout, err: stderr}
}

// flags returns the flag set of a subcommand with the flags every one
// takes; usage is its synopsis, such as "sessions show ID".
func (e *env) flags(usage, summary string) *flag.FlagSet {
	fs := flag.NewFlagSet(usage, flag.ContinueOnError)
	fs.SetOutput(e.err)
	fs.StringVar(&e.api, "api", envOr("AGENTBUS_API", DefaultAPI), "the API's base URL ($AGENTBUS_API)")
	// The token from the environment is set after the flag is declared, so
	// that the help never prints it as the flag's default.
	fs.StringVar(&e.token, "token", "", "the bearer token ($AGENTBUS_TOKEN)")
	e.token = os.Getenv("AGENTBUS_TOKEN")
	fs.BoolVar(&e.json, "json", false, "print the API's JSON instead of a table")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: agentbus %s [--api URL] [--token TOKEN] [--json]\n\n%s\n\nflags:\n", usage, summary)
		fs.PrintDefaults()
	}
	return fs
}

// parse reads the flags, which may come before, between or after the
// arguments, and wants between min and max arguments (max < 0: any).
func (e *env) parse(fs *flag.FlagSet, args []string, min, max int) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, flag.ErrHelp
			}
			return nil, &Error{Code: ExitUsage, Err: err}
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(positional) < min || (max >= 0 && len(positional) > max) {
		fs.Usage()
		return nil, usageError("%s: want %s, got %d", fs.Name(), arguments(min, max), len(positional))
	}
	if !strings.HasPrefix(e.api, "http://") && !strings.HasPrefix(e.api, "https://") {
		e.api = "http://" + e.api
	}
	e.client = &client.Client{Base: e.api, Token: e.token}
	return positional, nil
}

func arguments(min, max int) string {
	switch {
	case min == max && min == 1:
		return "1 argument"
	case min == max:
		return fmt.Sprintf("%d arguments", min)
	case max < 0:
		return fmt.Sprintf("at least %d arguments", min)
	default:
		return fmt.Sprintf("%d to %d arguments", min, max)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// subcommand is one verb of a command.
type subcommand struct {
	synopsis string
	summary  string
	run      func(e *env, fs *flag.FlagSet, args []string) error
}

// dispatch runs the subcommand args[0] of cmd among subs.
func dispatch(ctx context.Context, cmd string, subs []subcommand, args []string, stdout, stderr io.Writer) error {
	usage := func(w io.Writer) {
		fmt.Fprintf(w, "usage: agentbus %s <subcommand> [arguments] [--api URL] [--token TOKEN] [--json]\n\nsubcommands:\n", cmd)
		for _, s := range subs {
			fmt.Fprintf(w, "  %-48s %s\n", s.synopsis, s.summary)
		}
		fmt.Fprintf(w, "\nThe API is $AGENTBUS_API (default %s), the token $AGENTBUS_TOKEN.\n\n%s", DefaultAPI, ExitCodesHelp)
	}
	if len(args) == 0 {
		usage(stderr)
		return usageError("%s: a subcommand is required", cmd)
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return nil
	}
	for _, s := range subs {
		name, _, _ := strings.Cut(s.synopsis, " ")
		if name != args[0] {
			continue
		}
		e := newEnv(ctx, stdout, stderr)
		fs := e.flags(cmd+" "+s.synopsis, s.summary)
		err := s.run(e, fs, args[1:])
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return apiError(err)
	}
	usage(stderr)
	return usageError("%s: unknown subcommand %q", cmd, args[0])
}
