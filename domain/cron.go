package domain

import (
	"strconv"
	"strings"
	"time"
	// The IANA database is embedded so that time zone validation gives the
	// same answer on every host, with or without system tzdata.
	_ "time/tzdata"
)

// cronField describes one field of a 5-field cron expression.
type cronField struct {
	name     string
	min, max int
	names    []string // optional names, index = value - min offset
}

var cronFields = []cronField{
	{name: "minute", min: 0, max: 59},
	{name: "hour", min: 0, max: 23},
	{name: "day of month", min: 1, max: 31},
	{name: "month", min: 1, max: 12, names: []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}},
	// Sunday is 0 only: the scheduler's cron library refuses 7.
	{name: "day of week", min: 0, max: 6, names: []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}},
}

// ValidateCron checks a standard 5-field cron expression (minute hour
// day-of-month month day-of-week, Sunday = 0) with *, lists, ranges,
// steps, and month and weekday names. Macros such as @daily, 6-field
// (seconds) expressions, a time zone prefix and "?" are refused:
// schedulers disagree on them. Every expression it accepts is one that
// robfig/cron's standard parser, which the scheduler runs, accepts with
// the same meaning (a test of the scheduler checks it); it accepts less
// than that parser (no empty list elements, no step above the field's
// range) so that what is stored reads the same in any cron.
func ValidateCron(expr string) error {
	fields := strings.Fields(expr)
	if len(fields) != len(cronFields) {
		return invalid("schedule.cronExpression", "must have 5 fields (minute hour day-of-month month day-of-week), got %d", len(fields))
	}
	for i, f := range fields {
		for _, part := range strings.Split(f, ",") {
			if err := cronFields[i].check(part); err != nil {
				return err
			}
		}
	}
	return nil
}

func (cf cronField) fail(part string) error {
	return invalid("schedule.cronExpression", "invalid %s %q", cf.name, part)
}

// check validates one list element: *, a, a-b, */n, a/n or a-b/n.
func (cf cronField) check(part string) error {
	rng, step, hasStep := strings.Cut(part, "/")
	if hasStep {
		n, err := strconv.Atoi(step)
		if err != nil || n < 1 || n > cf.max {
			return cf.fail(part)
		}
	}
	if rng == "*" {
		return nil
	}
	lo, hi, isRange := strings.Cut(rng, "-")
	a, ok := cf.value(lo)
	if !ok {
		return cf.fail(part)
	}
	if !isRange {
		return nil
	}
	b, ok := cf.value(hi)
	if !ok || b < a {
		return cf.fail(part)
	}
	return nil
}

// value parses a number or a name within the field's bounds.
func (cf cronField) value(s string) (int, bool) {
	for i, n := range cf.names {
		if strings.EqualFold(s, n) {
			if cf.name == "month" {
				return i + 1, true
			}
			return i, true
		}
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < cf.min || v > cf.max {
		return 0, false
	}
	return v, true
}

// ValidateTimeZone checks an IANA time zone identifier (Europe/Lisbon).
// "Local" and "" are refused: they mean different zones on different hosts.
func ValidateTimeZone(tz string) error {
	if tz == "" || tz == "Local" {
		return invalid("schedule.timeZone", "must be an IANA time zone such as Europe/Lisbon")
	}
	if _, err := time.LoadLocation(tz); err != nil {
		return invalid("schedule.timeZone", "unknown IANA time zone %q", tz)
	}
	return nil
}

// AgentSchedule says when a scheduled template runs.
type AgentSchedule struct {
	CronExpression string `json:"cronExpression"`
	TimeZone       string `json:"timeZone"`
	IsEnabled      bool   `json:"isEnabled"`
}

// Validate checks the cron expression and the time zone.
func (s AgentSchedule) Validate() error {
	if err := ValidateCron(s.CronExpression); err != nil {
		return err
	}
	return ValidateTimeZone(s.TimeZone)
}
