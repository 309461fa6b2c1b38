package schedule_test

import (
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/domain/schedule"
)

var berlin = mustZone("Europe/Berlin")

func mustZone(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return loc
}

func parse(t *testing.T, expr, tz string) schedule.Schedule {
	t.Helper()
	s, err := schedule.Parse(domain.AgentSchedule{CronExpression: expr, TimeZone: tz, IsEnabled: true})
	require.NoError(t, err)
	return s
}

// dueBetween lists the due times in (from, to].
func dueBetween(s schedule.Schedule, from, to time.Time) []string {
	var out []string
	for due, ok := s.Next(from); ok && !due.After(to); due, ok = s.Next(due) {
		out = append(out, due.In(berlin).Format("2006-01-02 15:04 MST"))
	}
	return out
}

func TestDaylightSavingInBerlinFollowsTheLibrary(t *testing.T) {
	t.Parallel()
	spring := time.Date(2027, 3, 27, 12, 0, 0, 0, berlin)  // the day before clocks go 02:00 -> 03:00
	autumn := time.Date(2027, 10, 30, 12, 0, 0, 0, berlin) // the day before clocks go 03:00 -> 02:00
	tests := []struct {
		name string
		expr string
		from time.Time
		want []string
	}{
		{"a time the spring-forward skips does not run that day", "30 2 * * *", spring,
			[]string{"2027-03-29 02:30 CEST"}},
		{"hourly runs on the hours that exist", "0 1-4 28 3 *", spring,
			[]string{"2027-03-28 01:00 CET", "2027-03-28 03:00 CEST", "2027-03-28 04:00 CEST"}},
		{"a time the fall-back repeats runs at both instants", "30 2 * * *", autumn,
			[]string{"2027-10-31 02:30 CEST", "2027-10-31 02:30 CET", "2027-11-01 02:30 CET"}},
		{"a time outside the changed hour runs once", "0 9 * * *", spring,
			[]string{"2027-03-28 09:00 CEST", "2027-03-29 09:00 CEST"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := dueBetween(parse(t, tt.expr, "Europe/Berlin"), tt.from, tt.from.AddDate(0, 0, 2))
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestPlanStartsWhatIsWithinTheGraceAndSkipsTheRest(t *testing.T) {
	t.Parallel()
	s := parse(t, "*/10 * * * *", "UTC")
	at := func(h, m int) time.Time { return time.Date(2027, 1, 1, h, m, 0, 0, time.UTC) }
	tests := []struct {
		name        string
		cursor, now time.Time
		want        schedule.Plan
	}{
		{"nothing due yet", at(9, 0), at(9, 5), schedule.Plan{Through: at(9, 0)}},
		{"the due time itself", at(9, 0), at(9, 10), schedule.Plan{Start: []time.Time{at(9, 10)}, Through: at(9, 10)}},
		{"missed ones within the grace, each once", at(9, 0), at(9, 35),
			schedule.Plan{Start: []time.Time{at(9, 10), at(9, 20), at(9, 30)}, Through: at(9, 30)}},
		{"beyond the grace skipped, the rest started", at(8, 0), at(9, 35),
			schedule.Plan{Start: []time.Time{at(8, 40), at(8, 50), at(9, 0), at(9, 10), at(9, 20), at(9, 30)},
				Skipped: at(8, 10), Through: at(9, 30)}},
		{"exactly the grace late is skipped", at(8, 20), at(9, 30),
			schedule.Plan{Start: []time.Time{at(8, 40), at(8, 50), at(9, 0), at(9, 10), at(9, 20), at(9, 30)},
				Skipped: at(8, 30), Through: at(9, 30)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, s.PlanAt(tt.cursor, tt.now, time.Hour))
		})
	}
}

func TestAScheduleThatNeverComesHasNoNextDueTime(t *testing.T) {
	t.Parallel()
	_, ok := parse(t, "0 0 31 2 *", "UTC").Next(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
	assert.False(t, ok)
}

// libraryParser is how the scheduler reads expressions.
var libraryParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

var cronSeeds = []string{
	"* * * * *", "0 9 * * MON-FRI", "*/15 8-18 * * 1-5", "0 0 1,15 * *", "30 6 * jan,jul sun", "5-10/2 * * * *",
	"0 0 * * 7", "0 0 * * 5-7", "1,,2 * * * *", ",5 * * * *", "*-5 * * * *", "? * * * *", "*/60 * * * *",
	"CRON_TZ=UTC 0 0 * * *", "TZ=UTC * * * *", "@daily", "0 7 * * 1/2", "+5 * * * *", "0 0 * JAN/2 *",
}

// FuzzDomainAcceptsOnlyWhatTheLibraryRuns checks that an expression the
// API stores is one the scheduler can run: domain.ValidateCron accepts a
// subset of what the library's parser does.
func FuzzDomainAcceptsOnlyWhatTheLibraryRuns(f *testing.F) {
	for _, s := range cronSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		if domain.ValidateCron(expr) != nil {
			return
		}
		_, err := libraryParser.Parse(expr)
		assert.NoError(t, err, "domain accepts %q, the library refuses it", expr)
	})
}
