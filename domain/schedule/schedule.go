// Package schedule reads a template's AgentSchedule with robfig/cron, the
// cron library the scheduler runs on, and says which due times to start.
//
// Daylight-saving time follows the library's rule. Its documented one: a
// wall-clock time that a spring-forward skips does not run that day (in
// Europe/Berlin, "30 2 * * *" does not run on the last Sunday of March).
// And what it does in autumn: a wall-clock time that a fall-back repeats
// runs at both instants ("30 2 * * *" runs at 02:30 CEST and again at
// 02:30 CET on the last Sunday of October), while a schedule by the
// minute or the hour runs through the repeated hour as the clock shows
// it. Each instant is a due time of its own (its id is the instant in
// UTC), so neither is ever started twice.
package schedule

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/agentbus/agentbus/domain"
)

// parser reads the five standard fields and nothing else: no seconds, no
// @descriptors. A CRON_TZ= prefix never reaches it (domain.ValidateCron
// refuses it), so the time zone is always the schedule's own.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// Schedule is an AgentSchedule that can tell its due times.
type Schedule struct {
	spec *cron.SpecSchedule
}

// Parse validates s as the domain does and reads it with the library.
// Whether it is enabled is the caller's business.
func Parse(s domain.AgentSchedule) (Schedule, error) {
	if err := s.Validate(); err != nil {
		return Schedule{}, err
	}
	spec, err := parser.Parse(s.CronExpression)
	if err != nil {
		return Schedule{}, fmt.Errorf("schedule %q: %w", s.CronExpression, err)
	}
	ss, ok := spec.(*cron.SpecSchedule)
	if !ok {
		return Schedule{}, fmt.Errorf("schedule %q: not a cron expression", s.CronExpression)
	}
	loc, err := time.LoadLocation(s.TimeZone)
	if err != nil {
		return Schedule{}, fmt.Errorf("schedule time zone %q: %w", s.TimeZone, err)
	}
	ss.Location = loc
	return Schedule{spec: ss}, nil
}

// Next returns the first due time after t, in UTC, and false when there
// is none within five years (the library's horizon: "0 0 31 2 *" never
// comes).
func (s Schedule) Next(t time.Time) (time.Time, bool) {
	next := s.spec.Next(t)
	if next.IsZero() {
		return time.Time{}, false
	}
	return next.UTC(), true
}

// Location returns the time zone the expression is read in.
func (s Schedule) Location() *time.Location { return s.spec.Location }

// Plan is what to do with the due times of one schedule at one moment.
type Plan struct {
	// Start are the due times to start now, oldest first: every due time
	// after the cursor, up to now, that is less than the grace late.
	Start []time.Time
	// Skipped is the first due time too late to start, zero when none
	// was; every due time from it up to Now minus the grace is skipped.
	Skipped time.Time
	// Through is how far the due times are handled once Start are: the
	// new cursor.
	Through time.Time
}

// PlanAt returns the plan at now for a schedule whose due times up to and
// including cursor are handled. A due time exactly the grace late is
// skipped.
func (s Schedule) PlanAt(cursor, now time.Time, grace time.Duration) Plan {
	p := Plan{Through: cursor.UTC()}
	first, ok := s.Next(cursor)
	if !ok || first.After(now) {
		return p
	}
	horizon := now.Add(-grace).UTC()
	if !first.After(horizon) {
		p.Skipped, p.Through = first, horizon
	}
	for due, ok := s.Next(p.Through); ok && !due.After(now); due, ok = s.Next(due) {
		p.Start = append(p.Start, due)
		p.Through = due
	}
	return p
}
