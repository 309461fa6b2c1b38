package reactions

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/domain/schedule"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/postgres/queries"
	"github.com/agentbus/agentbus/sidecar/workspace"
)

const (
	// DefaultSchedulerInterval is how often Scheduler looks for due
	// times. A session starts at most this late.
	DefaultSchedulerInterval = 10 * time.Second
	// DefaultScheduleGrace is how late a missed due time may still be
	// started.
	DefaultScheduleGrace = time.Hour
)

// scheduledSessionNamespace derives a scheduled session's id from the id
// of the command that starts it.
var scheduledSessionNamespace = uuid.MustParse("5f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0")

// Scheduler starts the sessions of scheduled templates (seed 001: "the
// scheduler dispatches a StartAgentSessionCommand on the configured cron
// schedule"). Every Interval it takes each active template whose schedule
// is enabled and starts a session, as the template's owner and with its
// defaults, for each due time that came since it last looked.
//
// The start command's id, and so the session's, derives from the template
// and the due time: copies of this worker, or a restart that looks again,
// send the same command, which creates the session once. Per template it
// records the last due time handled, so a scheduler that comes back starts
// the due times it missed that are less than Grace late, once each, and
// skips (and logs) the older ones. No due time before the schedule was
// last set, changed or its template activated is ever started.
type Scheduler struct {
	DB     *pgxpool.Pool
	Client *command.Client
	// Workspace is the root the sessions' working directories are in:
	// <root>/<owner>/scheduled/<template id>/<due time, UTC, basic ISO 8601>.
	Workspace workspace.Root
	// Grace is how late a missed due time may be and still start; zero
	// means DefaultScheduleGrace.
	Grace time.Duration
	// Interval is how often due times are looked for; zero means
	// DefaultSchedulerInterval.
	Interval time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Run starts due sessions until ctx ends. A failed round is logged and
// tried again on the next tick.
func (s Scheduler) Run(ctx context.Context) error {
	interval := s.Interval
	if interval <= 0 {
		interval = DefaultSchedulerInterval
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if err := s.Tick(ctx); err != nil && ctx.Err() == nil {
			slog.Warn("scheduler round failed", "component", "scheduler", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Tick starts the sessions due by now, for every scheduled template.
func (s Scheduler) Tick(ctx context.Context) error {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	at := now().UTC()
	templates, err := queries.ScheduledTemplates(ctx, s.DB)
	if err != nil {
		return err
	}
	var errs []error
	for _, st := range templates {
		errs = append(errs, s.handle(ctx, st, at))
	}
	return errors.Join(errs...)
}

// handle starts the due times of one template and moves its mark.
func (s Scheduler) handle(ctx context.Context, st queries.ScheduledTemplate, now time.Time) error {
	tmpl := st.Template
	log := slog.Default().With("component", "scheduler", "template_id", tmpl.ID)
	sched, err := schedule.Parse(*tmpl.Schedule)
	if err != nil {
		log.Warn("schedule not runnable", "error", err)
		return nil
	}
	since := tmpl.ScheduleSince
	if since.IsZero() { // stored before it was recorded
		since = tmpl.UpdatedAt
	}
	cursor := st.HandledThrough
	if since.After(cursor) {
		cursor = since
	}
	grace := s.Grace
	if grace <= 0 {
		grace = DefaultScheduleGrace
	}
	plan := sched.PlanAt(cursor, now, grace)
	if !plan.Skipped.IsZero() {
		log.Warn("scheduled runs skipped: the scheduler was not running and they are later than the grace",
			"first_due", plan.Skipped, "until", now.Add(-grace), "grace", grace)
	}
	for _, due := range plan.Start {
		if err := s.start(ctx, tmpl, due, sched.Location()); err != nil {
			return err
		}
		if err := postgres.MarkScheduleHandled(ctx, s.DB, tmpl.ID, due); err != nil {
			return err
		}
	}
	if plan.Through.After(st.HandledThrough) {
		return postgres.MarkScheduleHandled(ctx, s.DB, tmpl.ID, plan.Through)
	}
	return nil
}

// start sends the StartSession of one due time. A refusal (the template
// was deactivated a moment ago, a default skill was) is logged by
// doDerived and counts as handled: the same command would be refused
// again.
func (s Scheduler) start(ctx context.Context, tmpl domain.AgentTemplateSnapshot, due time.Time, loc *time.Location) error {
	stamp := due.UTC().Format("20060102T150405Z")
	key := "schedule/" + tmpl.ID.String() + "/" + due.UTC().Format(time.RFC3339)
	cmdID := uuid.NewSHA1(commandNamespace, []byte(key))
	dir, err := s.Workspace.Resolve(tmpl.OwnerID, filepath.Join("scheduled", tmpl.ID.String(), stamp), "")
	if err != nil {
		return err
	}
	id := tmpl.ID
	data := command.StartSessionData{
		WorkingDirectory: dir, TemplateID: &id, Objective: scheduledObjective(tmpl),
		Name: truncate(tmpl.Name+" "+due.In(loc).Format("2006-01-02 15:04 MST"), domain.MaxSessionNameChars),
	}
	_, err = doDerived(ctx, s.Client, "scheduler", key, domain.AggregateSession, command.StartSession,
		uuid.NewSHA1(scheduledSessionNamespace, cmdID[:]), tmpl.OwnerID.String(), data)
	return err
}

// scheduledObjective is what a scheduled session is asked to achieve: the
// template's description, which says what its automation is for.
func scheduledObjective(tmpl domain.AgentTemplateSnapshot) string {
	if d := strings.TrimSpace(tmpl.Description); d != "" {
		return truncate(d, domain.MaxObjectiveChars)
	}
	return "Scheduled run of " + tmpl.Name
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}
