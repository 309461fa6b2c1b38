package reactions

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
)

// AutoContinueConsumer is the durable consumer of the auto-continue
// reaction. Renaming it replays every event to it: keep it stable.
const AutoContinueConsumer = "autocontinue"

// DefaultValidationTimeout bounds one validation command.
const DefaultValidationTimeout = 10 * time.Minute

// DefaultValidationCommands are the shell commands that check the
// criteria that carry no command of their own. The CoverageThreshold
// command prints the coverage; its last percentage is the one compared.
var DefaultValidationCommands = map[domain.ValidationType]string{
	domain.ValidationTestsPassing:      "make test",
	domain.ValidationLintPassing:       "make lint",
	domain.ValidationCoverageThreshold: "make coverage",
}

// turnEnds are the events of a session going Running -> Idle: a turn that
// ended, and the last one, which delivered the output.
var turnEnds = []string{
	"agents.evt.session.*.agent_session_turn_completed",
	"agents.evt.session.*.agent_session_output_ready",
}

// AutoContinue runs the validate-and-continue loop of seed 001 §8.10.
// When a turn of a session with auto-continue enabled ends, it runs the
// session's validation criteria in its working directory. If one fails,
// it counts a continuation on the session and enqueues a System message
// with what failed, which the delivery reaction hands to the agent; once
// MaxContinuations are spent it stops and notifies the owner instead.
// When every criterion passes the session stays Idle.
//
// The continuation and the message are derived from the turn's event, so
// a redelivered event repeats commands that change nothing.
type AutoContinue struct {
	JS     jetstream.JetStream
	DB     *pgxpool.Pool
	Client *command.Client
	// Commands check TestsPassing, LintPassing and CoverageThreshold; a
	// type missing here uses DefaultValidationCommands.
	Commands map[domain.ValidationType]string
	// Timeout bounds each validation command; zero means
	// DefaultValidationTimeout.
	Timeout time.Duration
}

// Run consumes the turn ends until ctx ends.
func (a AutoContinue) Run(ctx context.Context) error {
	return bus.Run(ctx, a.JS, bus.RunnerConfig{
		Stream: bus.StreamEvents, Consumer: AutoContinueConsumer, Handler: a.Handle,
		Concurrency: 4, OrderKey: sessionKey, FilterSubjects: turnEnds,
	})
}

// Handle validates the session after one turn and continues it if needed.
func (a AutoContinue) Handle(ctx context.Context, m jetstream.Msg) error {
	env, err := bus.DecodeEnvelope(m.Data())
	if err != nil {
		return bus.Permanent(err)
	}
	id, err := uuid.Parse(env.AggregateID)
	if err != nil {
		return bus.Permanent(err)
	}
	s, err := postgres.Sessions{}.Get(ctx, a.DB, id)
	if err != nil {
		return notFoundIsFinal(err)
	}
	ac := s.AutoContinue()
	if ac == nil || !ac.IsEnabled || s.Status() != domain.StatusIdle {
		return nil // nothing to validate, or the session went on meanwhile
	}
	failures := a.validate(ctx, s.WorkingDirectory(), ac.ValidationCriteria)
	if len(failures) == 0 {
		return nil
	}
	reason := strings.Join(failures, "\n\n")
	r, err := a.do(ctx, env.ID, domain.AggregateSession, command.RecordAutoContinuation, id, nil)
	if err != nil {
		return err
	}
	if r.Err() != nil {
		return a.stop(ctx, env, id, reason)
	}
	_, err = a.do(ctx, env.ID, domain.AggregateQueue, command.EnqueueMessage, id, command.EnqueueData{
		MessageID: uuid.NewSHA1(commandNamespace, []byte("autocontinue/"+env.ID)),
		Content:   cut("Validation failed: "+reason+"\n\nContinue working.", domain.MaxMessageChars),
		Priority:  domain.PriorityQueued, Source: domain.MessageFromSystem,
	})
	return err
}

// stop ends the loop that reached MaxContinuations, which leaves the
// session Idle without pending review, and notifies the owner. A
// continuation refused for another reason (the session left Idle, or
// auto-continue was turned off) needs nobody.
func (a AutoContinue) stop(ctx context.Context, env bus.Envelope, id uuid.UUID, reason string) error {
	r, err := a.do(ctx, env.ID, domain.AggregateSession, command.StopAutoContinuation, id, nil)
	if err != nil || r.Err() != nil {
		return err
	}
	s, err := postgres.Sessions{}.Get(ctx, a.DB, id)
	if err != nil {
		return notFoundIsFinal(err)
	}
	ac := s.AutoContinue()
	if ac == nil {
		return nil
	}
	env.OwnerID = s.OwnerID().String()
	return publishNotification(ctx, a.JS, env, Notification{
		SessionID: id.String(), Kind: NotifyAutoContinueStopped, Title: "Auto-continue stopped",
		Message: cut(fmt.Sprintf("Validation still fails after %d automatic continuations; the session waits for your review.\n\n%s",
			ac.MaxContinuations, reason), domain.MaxMessageChars),
	})
}

// validate runs every criterion and describes each one that failed.
func (a AutoContinue) validate(ctx context.Context, dir string, criteria []domain.ValidationCriterion) []string {
	var failures []string
	for _, c := range criteria {
		if f := a.check(ctx, dir, c); f != "" {
			failures = append(failures, f)
		}
	}
	return failures
}

// check runs one criterion's command and returns why it failed, or "".
func (a AutoContinue) check(ctx context.Context, dir string, c domain.ValidationCriterion) string {
	line := c.CustomCommand
	if c.Type != domain.ValidationCustomCommand {
		if line = a.Commands[c.Type]; line == "" {
			line = DefaultValidationCommands[c.Type]
		}
	}
	timeout := a.Timeout
	if timeout <= 0 {
		timeout = DefaultValidationTimeout
	}
	out, err := runShell(ctx, dir, line, timeout)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("%s: `%s` did not finish within %s.\n%s", c.Type, line, timeout, tail(out))
	case err != nil:
		return fmt.Sprintf("%s: `%s` failed (%v).\n%s", c.Type, line, err, tail(out))
	case c.Type == domain.ValidationCoverageThreshold && c.Threshold != nil:
		got, ok := lastPercent(out)
		if !ok {
			return fmt.Sprintf("%s: `%s` printed no coverage percentage.\n%s", c.Type, line, tail(out))
		}
		if got < *c.Threshold {
			return fmt.Sprintf("%s: coverage is %g%%, below the required %g%%.", c.Type, got, *c.Threshold)
		}
	}
	return ""
}

// runShell runs line with sh in dir and returns its combined output. The
// command gets its own process group, so that a timeout stops what it
// started too, not only the shell.
func runShell(ctx context.Context, dir, line string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return string(out), ctx.Err()
	}
	return string(out), err
}

// maxOutputChars is how much of a failing command's output the agent is
// shown: the end, where test runners and linters sum up.
const maxOutputChars = 1500

func tail(out string) string {
	out = strings.TrimSpace(out)
	r := []rune(out)
	if len(r) <= maxOutputChars {
		return out
	}
	return "…" + string(r[len(r)-maxOutputChars:])
}

var percent = regexp.MustCompile(`(\d+(?:\.\d+)?)\s*%`)

// lastPercent finds the last percentage in out, where coverage tools
// print the total.
func lastPercent(out string) (float64, bool) {
	all := percent.FindAllStringSubmatch(out, -1)
	if len(all) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(all[len(all)-1][1], 64)
	return v, err == nil
}

// do sends an auto-continue command, derived from its cause.
func (a AutoContinue) do(ctx context.Context, cause, aggregate, name string, id uuid.UUID, data any) (command.Result, error) {
	return doDerived(ctx, a.Client, "autocontinue", cause+"/"+name, aggregate, name, id, "", data)
}
