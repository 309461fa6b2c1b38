package reactions_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/handlers/commands"
	"github.com/agentbus/agentbus/handlers/reactions"
	"github.com/agentbus/agentbus/sidecar/workspace"
)

// clock is a time the test moves by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

// scheduled creates a template of the flow's owner with schedule.
func (f *flow) scheduled(t *testing.T, schedule domain.AgentSchedule) uuid.UUID {
	t.Helper()
	id := uuid.New()
	f.do(t, domain.AggregateTemplate, command.CreateTemplate, id, command.CreateTemplateData{
		Name: "Nightly " + id.String()[:8], Description: "Triage the new issues.", ModelID: "claude-sonnet-4-5",
		AllowedTools: []string{"Read"}, DefaultBudgetCapUsd: domain.Dollars(3), Schedule: &schedule})
	return id
}

// scheduler returns a scheduler on the flow with the test's clock and a
// command client of its own, as a copy in a process of its own has.
func (f *flow) scheduler(t *testing.T, c *clock, grace time.Duration) reactions.Scheduler {
	t.Helper()
	root, err := workspace.New(t.TempDir())
	require.NoError(t, err)
	client, err := command.NewClient(f.nc, f.js, commands.Results{Pool: f.pool})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	return reactions.Scheduler{DB: f.pool, Client: client, Workspace: root, Now: c.Now, Grace: grace}
}

// tickAt moves the clock to at and runs one round of each scheduler.
func tickAt(t *testing.T, c *clock, at time.Time, schedulers ...reactions.Scheduler) {
	t.Helper()
	c.Set(at)
	var wg sync.WaitGroup
	for _, s := range schedulers {
		wg.Add(1)
		go func() { defer wg.Done(); assert.NoError(t, s.Tick(context.Background())) }()
	}
	wg.Wait()
}

// scheduledSessions returns the last element of the working directory of
// each of the template's sessions (its due time), in order.
func (f *flow) scheduledSessions(t *testing.T, template uuid.UUID) []string {
	t.Helper()
	rows, err := f.pool.Query(context.Background(),
		"SELECT doc->>'workingDirectory' FROM sessions WHERE template_id = $1", template)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var dir string
		require.NoError(t, rows.Scan(&dir))
		out = append(out, filepath.Base(dir))
	}
	require.NoError(t, rows.Err())
	slices.Sort(out)
	return out
}

// nextMinute is the first whole minute after now: the first due time of
// an every-minute schedule created now.
func nextMinute() time.Time { return time.Now().UTC().Truncate(time.Minute).Add(time.Minute) }

func stamp(t time.Time) string { return t.UTC().Format("20060102T150405Z") }

func TestAScheduleEveryMinuteStartsOneSessionPerMinute(t *testing.T) {
	f := startFlow(t, 1)
	tmpl := f.scheduled(t, domain.AgentSchedule{CronExpression: "* * * * *", TimeZone: "UTC", IsEnabled: true})
	first := nextMinute()
	c := &clock{}
	s := f.scheduler(t, c, 0)

	tickAt(t, c, first.Add(-30*time.Second), s)
	assert.Empty(t, f.scheduledSessions(t, tmpl), "nothing is due yet")
	tickAt(t, c, first.Add(5*time.Second), s)
	tickAt(t, c, first.Add(35*time.Second), s)
	assert.Equal(t, []string{stamp(first)}, f.scheduledSessions(t, tmpl))
	cmdStart := uuid.NewSHA1(uuid.MustParse("9c4d2e1f-7a3b-4c5d-8e6f-0a1b2c3d4e5f"), []byte("schedule/"+tmpl.String()+"/"+first.Format(time.RFC3339)))
	firstID := uuid.NewSHA1(uuid.MustParse("5f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"), cmdStart[:])
	f.waitStatus(t, firstID, domain.StatusRunning)

	tickAt(t, c, first.Add(65*time.Second), s)
	assert.Equal(t, []string{stamp(first), stamp(first.Add(time.Minute))}, f.scheduledSessions(t, tmpl))

	// Sessions of the owner with the template's defaults, under the
	// owner's workspace; the pool of one leaves the second Queued.
	var owner, secondID uuid.UUID
	var dir, model, objective string
	require.NoError(t, f.pool.QueryRow(context.Background(),
		"SELECT owner_id, doc->>'workingDirectory', doc->>'modelId', doc->>'objective' FROM sessions WHERE id = $1", firstID).
		Scan(&owner, &dir, &model, &objective))
	assert.Equal(t, f.owner, owner)
	assert.True(t, filepath.IsAbs(dir))
	assert.Equal(t, filepath.Join(f.owner.String(), "scheduled", tmpl.String(), stamp(first)), lastParts(dir, 4))
	assert.Equal(t, "claude-sonnet-4-5", model)
	assert.Equal(t, "Triage the new issues.", objective)
	require.NoError(t, f.pool.QueryRow(context.Background(),
		"SELECT id FROM sessions WHERE template_id = $1 AND id <> $2", tmpl, firstID).Scan(&secondID))
	f.waitEvents(t, secondID, "session_pool_exhausted", 1)
	assert.Equal(t, domain.StatusQueued, f.status(t, secondID), "a full pool queues a scheduled session like any other")
}

func lastParts(p string, n int) string {
	parts := []string{}
	for range n {
		parts = append([]string{filepath.Base(p)}, parts...)
		p = filepath.Dir(p)
	}
	return filepath.Join(parts...)
}

func TestTwoSchedulersStartEachDueTimeOnce(t *testing.T) {
	f := startFlow(t, 0)
	tmpl := f.scheduled(t, domain.AgentSchedule{CronExpression: "* * * * *", TimeZone: "UTC", IsEnabled: true})
	first := nextMinute()
	c := &clock{}
	a, b := f.scheduler(t, c, 0), f.scheduler(t, c, 0)

	tickAt(t, c, first.Add(time.Second), a, b)
	tickAt(t, c, first.Add(61*time.Second), a, b)
	tickAt(t, c, first.Add(62*time.Second), b, a)
	assert.Equal(t, []string{stamp(first), stamp(first.Add(time.Minute))}, f.scheduledSessions(t, tmpl))
}

func TestARestartStartsWhatItMissedWithinTheGraceOnce(t *testing.T) {
	tests := []struct {
		name  string
		grace time.Duration
		want  func(first time.Time) []string
	}{
		{"within the grace every missed due time starts", time.Hour, func(first time.Time) []string {
			return []string{stamp(first), stamp(first.Add(time.Minute)), stamp(first.Add(2 * time.Minute)), stamp(first.Add(3 * time.Minute))}
		}},
		{"beyond the grace they are skipped", 90 * time.Second, func(first time.Time) []string {
			return []string{stamp(first), stamp(first.Add(2 * time.Minute)), stamp(first.Add(3 * time.Minute))}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := startFlow(t, 0)
			tmpl := f.scheduled(t, domain.AgentSchedule{CronExpression: "* * * * *", TimeZone: "UTC", IsEnabled: true})
			first := nextMinute()
			c := &clock{}
			tickAt(t, c, first.Add(time.Second), f.scheduler(t, c, tt.grace))

			// A new scheduler, after three due times went by without one.
			restarted := f.scheduler(t, c, tt.grace)
			tickAt(t, c, first.Add(3*time.Minute+10*time.Second), restarted)
			tickAt(t, c, first.Add(3*time.Minute+20*time.Second), restarted)
			assert.Equal(t, tt.want(first), f.scheduledSessions(t, tmpl))
		})
	}
}

func TestADisabledScheduleOrADeactivatedTemplateStartsNothing(t *testing.T) {
	f := startFlow(t, 0)
	disabled := f.scheduled(t, domain.AgentSchedule{CronExpression: "* * * * *", TimeZone: "UTC", IsEnabled: false})
	deactivated := f.scheduled(t, domain.AgentSchedule{CronExpression: "* * * * *", TimeZone: "UTC", IsEnabled: true})
	f.do(t, domain.AggregateTemplate, command.DeactivateTemplate, deactivated, nil)
	running := f.scheduled(t, domain.AgentSchedule{CronExpression: "* * * * *", TimeZone: "UTC", IsEnabled: true})
	first := nextMinute()
	c := &clock{}
	s := f.scheduler(t, c, 0)

	tickAt(t, c, first.Add(time.Second), s)
	tickAt(t, c, first.Add(61*time.Second), s)
	assert.Empty(t, f.scheduledSessions(t, disabled))
	assert.Empty(t, f.scheduledSessions(t, deactivated))
	assert.Len(t, f.scheduledSessions(t, running), 2, "the enabled schedule of an active template runs")
}

// lastSunday returns the last Sunday of month in year, at hh:mm in loc.
func lastSunday(year int, month time.Month, hh, mm int, loc *time.Location) time.Time {
	d := time.Date(year, month+1, 0, hh, mm, 0, 0, loc)
	for d.Weekday() != time.Sunday {
		d = time.Date(d.Year(), d.Month(), d.Day()-1, hh, mm, 0, 0, loc)
	}
	return d
}

func TestDaylightSavingInBerlin(t *testing.T) {
	f := startFlow(t, 0)
	tmpl := f.scheduled(t, domain.AgentSchedule{CronExpression: "30 2 * * *", TimeZone: "Europe/Berlin", IsEnabled: true})
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	year := time.Now().Year() + 1
	spring := lastSunday(year, time.March, 12, 0, berlin)  // clocks went 02:00 -> 03:00 that night
	autumn := lastSunday(year, time.October, 0, 0, berlin) // clocks go 03:00 -> 02:00 that night
	c := &clock{}
	s := f.scheduler(t, c, 0)

	tickAt(t, c, spring.AddDate(0, 0, -1), s) // months since the template: all beyond the grace
	tickAt(t, c, spring, s)
	assert.Empty(t, f.scheduledSessions(t, tmpl), "02:30 does not exist on the spring-forward night: no run")
	monday := time.Date(spring.Year(), spring.Month(), spring.Day()+1, 2, 30, 10, 0, berlin)
	tickAt(t, c, monday, s)
	assert.Equal(t, []string{stamp(monday.Truncate(time.Minute))}, f.scheduledSessions(t, tmpl))

	tickAt(t, c, autumn.Add(-time.Hour), s)
	cest := time.Date(autumn.Year(), autumn.Month(), autumn.Day(), 0, 30, 10, 0, time.UTC) // the first 02:30, summer time
	tickAt(t, c, cest, s)
	cet := cest.Add(time.Hour) // the clock shows 02:30 again
	require.Equal(t, cest.In(berlin).Format("15:04"), cet.In(berlin).Format("15:04"))
	tickAt(t, c, cet, s)
	assert.Equal(t, []string{stamp(monday.Truncate(time.Minute)), stamp(cest.Truncate(time.Minute)), stamp(cet.Truncate(time.Minute))},
		f.scheduledSessions(t, tmpl), "02:30 runs at both instants of the fall-back night")
}
