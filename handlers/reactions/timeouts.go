package reactions

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/postgres/queries"
)

// DefaultTimeoutsInterval is how often Timeouts looks for expired waits.
// A wait expires at most this late.
const DefaultTimeoutsInterval = 5 * time.Second

// waitingStatuses are the statuses whose wait times out (see
// domain.AgentSession.NextDeadline).
var waitingStatuses = []string{
	string(domain.StatusWaitingForInput), string(domain.StatusWaitingForApproval), string(domain.StatusPaused),
}

// Timeouts makes the session's waits expire (seed 001: an unanswered
// question, an undecided tool permission, a pause held too long). Every
// Interval it finds the sessions whose deadline passed and sends each
// ExpireTimeouts; the session applies whatever its rules say.
//
// The command id is derived from the session and the deadline, so copies
// of this worker that find the same expired wait send the same command,
// which JetStream and the commands worker handle once. A new wait has a
// new deadline, and so a new command.
type Timeouts struct {
	DB     *pgxpool.Pool
	Client *command.Client
	// Interval is how often expired waits are looked for; zero means
	// DefaultTimeoutsInterval.
	Interval time.Duration
}

// Run expires due waits until ctx ends. A failed sweep is logged and
// tried again on the next tick.
func (t Timeouts) Run(ctx context.Context) error {
	interval := t.Interval
	if interval <= 0 {
		interval = DefaultTimeoutsInterval
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if err := t.Sweep(ctx); err != nil && ctx.Err() == nil {
			slog.Warn("timeout sweep failed", "component", "timeouts", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Sweep sends ExpireTimeouts to every session whose wait expired.
func (t Timeouts) Sweep(ctx context.Context) error {
	at := time.Now().UTC()
	ids, err := queries.DueSessions(ctx, t.DB, waitingStatuses, at)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		errs = append(errs, t.expire(ctx, id, at))
	}
	return errors.Join(errs...)
}

// expire sends ExpireTimeouts to the session if its wait is due at at.
func (t Timeouts) expire(ctx context.Context, id uuid.UUID, at time.Time) error {
	s, err := postgres.Sessions{}.Get(ctx, t.DB, id)
	if errors.Is(err, postgres.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	deadline, ok := s.NextDeadline()
	if !ok || deadline.After(at) {
		return nil
	}
	cmd, err := command.New(domain.AggregateSession, command.ExpireTimeouts, id, "", nil)
	if err != nil {
		return err
	}
	cmd.ID = uuid.NewSHA1(commandNamespace, []byte("expire/"+id.String()+"/"+deadline.UTC().Format(time.RFC3339Nano)))
	return t.Client.Send(ctx, cmd)
}
