package reactions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// AutoContinueConsumer is the durable consumer of the auto-continue
// reaction's turn ends; AutoContinueResultsConsumer, of the sidecars'
// validation results. Renaming them replays every event: keep them stable.
const (
	AutoContinueConsumer        = "autocontinue"
	AutoContinueResultsConsumer = "autocontinue-results"
)

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
	bus.EventFilter(domain.AgentSessionTurnCompletedEvent{}),
	bus.EventFilter(domain.AgentSessionOutputReadyEvent{}),
}

// AutoContinue runs the validate-and-continue loop of seed 001 §8.10.
// When a turn of a session with auto-continue enabled ends, it asks the
// session's sidecar to run the validation criteria (run_validation): they
// run where the agent works, as the agent, never in a process that holds
// the server's credentials. When the validation_result says a criterion
// failed, it counts a continuation on the session and enqueues a System
// message with what failed, which the delivery reaction hands to the
// agent; once MaxContinuations are spent it stops and notifies the owner
// instead. When every criterion passes the session stays Idle.
//
// The command to the sidecar, the continuation and the message are
// derived from the turn's event, so a redelivered event repeats commands
// that change nothing.
type AutoContinue struct {
	JS     jetstream.JetStream
	DB     *pgxpool.Pool
	Client *command.Client
	// Commands check TestsPassing, LintPassing and CoverageThreshold; a
	// type missing here uses DefaultValidationCommands.
	Commands map[domain.ValidationType]string
	// Timeout bounds each validation command; zero means the sidecar's
	// default (protocol.DefaultValidationTimeout).
	Timeout time.Duration
}

// Run consumes the turn ends and the validation results until ctx ends.
func (a AutoContinue) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 2)
	go func() {
		errs <- bus.Run(ctx, a.JS, bus.RunnerConfig{
			Stream: bus.StreamEvents, Consumer: AutoContinueConsumer, Handler: a.Handle,
			Concurrency: 4, OrderKey: sessionKey, FilterSubjects: turnEnds,
		})
	}()
	go func() {
		errs <- bus.Run(ctx, a.JS, bus.RunnerConfig{
			Stream: bus.StreamSidecarEvents, Consumer: AutoContinueResultsConsumer, Handler: a.HandleResult,
			Concurrency: 4, OrderKey: bus.BySubject,
			FilterSubjects: AutoContinueResultsFilters(),
		})
	}()
	err := <-errs
	cancel()
	return errors.Join(err, <-errs)
}

// Handle asks the sidecar of a session whose turn ended to validate it.
func (a AutoContinue) Handle(ctx context.Context, m jetstream.Msg) error {
	env, id, err := decodeEvent(m)
	if err != nil {
		return err
	}
	s, err := postgres.Sessions{}.Get(ctx, a.DB, id)
	if err != nil {
		return notFoundIsFinal(err)
	}
	ac := s.AutoContinue()
	if ac == nil || !ac.IsEnabled || s.Status() != domain.StatusIdle || len(ac.ValidationCriteria) == 0 {
		return nil // nothing to validate, or the session went on meanwhile
	}
	run := protocol.RunValidation{TimeoutMS: a.Timeout.Milliseconds()}
	for _, c := range ac.ValidationCriteria {
		run.Checks = append(run.Checks, protocol.ValidationCheck{Name: string(c.Type), Command: a.commandOf(c)})
	}
	return sendToSidecar(ctx, a.JS, id.String(), s.OwnerID().String(), env.ID, protocol.CommandRunValidation, run)
}

// commandOf returns the shell command that checks c.
func (a AutoContinue) commandOf(c domain.ValidationCriterion) string {
	if c.Type == domain.ValidationCustomCommand {
		return c.CustomCommand
	}
	if line := a.Commands[c.Type]; line != "" {
		return line
	}
	return DefaultValidationCommands[c.Type]
}

// HandleResult continues the session when its validation failed.
func (a AutoContinue) HandleResult(ctx context.Context, m jetstream.Msg) error {
	var ev protocol.RawEvent
	if err := json.Unmarshal(m.Data(), &ev); err != nil {
		return bus.Permanent(err)
	}
	var res protocol.ValidationResult
	if err := json.Unmarshal(ev.Data, &res); err != nil {
		return bus.Permanent(fmt.Errorf("validation_result: %w", err))
	}
	id, err := uuid.Parse(ev.SessionID)
	if err != nil {
		return bus.Permanent(err)
	}
	s, err := postgres.Sessions{}.Get(ctx, a.DB, id)
	if err != nil {
		return notFoundIsFinal(err)
	}
	ac := s.AutoContinue()
	if ac == nil || !ac.IsEnabled || s.Status() != domain.StatusIdle {
		return nil // turned off, or the session went on meanwhile
	}
	failures := judge(ac.ValidationCriteria, res.Checks)
	if len(failures) == 0 {
		return nil
	}
	reason := strings.Join(failures, "\n\n")
	cause := "validation/" + ev.SessionID + "/" + res.CommandID
	r, err := a.do(ctx, cause, domain.AggregateSession, command.RecordAutoContinuation, id, nil)
	if err != nil {
		return err
	}
	if r.Err() != nil {
		return a.stop(ctx, id, cause, reason)
	}
	_, err = a.do(ctx, cause, domain.AggregateQueue, command.EnqueueMessage, id, command.EnqueueData{
		MessageID: uuid.NewSHA1(commandNamespace, []byte("autocontinue/"+cause)),
		Content:   cut("Validation failed: "+reason+"\n\nContinue working.", domain.MaxMessageChars),
		Priority:  domain.PriorityQueued, Source: domain.MessageFromSystem,
	})
	return err
}

// stop ends the loop that reached MaxContinuations, which leaves the
// session Idle without pending review, and notifies the owner. A
// continuation refused for another reason (the session left Idle, or
// auto-continue was turned off) needs nobody.
func (a AutoContinue) stop(ctx context.Context, id uuid.UUID, cause, reason string) error {
	r, err := a.do(ctx, cause, domain.AggregateSession, command.StopAutoContinuation, id, nil)
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
	env := bus.Envelope{ID: uuid.NewSHA1(commandNamespace, []byte(cause)).String(), AggregateID: id.String(),
		Aggregate: domain.AggregateSession, OwnerID: s.OwnerID().String(), OccurredAt: time.Now().UTC()}
	return publishNotification(ctx, a.JS, env, Notification{
		SessionID: id.String(), Kind: NotifyAutoContinueStopped, Title: "Auto-continue stopped",
		Message: cut(fmt.Sprintf("Validation still fails after %d automatic continuations; the session waits for your review.\n\n%s",
			ac.MaxContinuations, reason), domain.MaxMessageChars),
	})
}

// judge describes each check that failed its criterion: a check that timed
// out or exited non-zero, or a coverage check whose last printed
// percentage is below the threshold.
func judge(criteria []domain.ValidationCriterion, checks []protocol.CheckResult) []string {
	var failures []string
	for i, c := range checks {
		var threshold *float64
		if i < len(criteria) && string(criteria[i].Type) == c.Name && criteria[i].Type == domain.ValidationCoverageThreshold {
			threshold = criteria[i].Threshold
		}
		switch {
		case c.TimedOut:
			failures = append(failures, fmt.Sprintf("%s: `%s` did not finish in time.\n%s", c.Name, c.Command, tail(c.Output)))
		case c.ExitCode != 0:
			failures = append(failures, fmt.Sprintf("%s: `%s` failed (exit status %d).\n%s", c.Name, c.Command, c.ExitCode, tail(c.Output)))
		case threshold != nil:
			got, ok := lastPercent(c.Output)
			if !ok {
				failures = append(failures, fmt.Sprintf("%s: `%s` printed no coverage percentage.\n%s", c.Name, c.Command, tail(c.Output)))
			} else if got < *threshold {
				failures = append(failures, fmt.Sprintf("%s: coverage is %g%%, below the required %g%%.", c.Name, got, *threshold))
			}
		}
	}
	return failures
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
