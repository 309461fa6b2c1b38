package domain_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
)

func templateParams() domain.NewTemplateParams {
	return domain.NewTemplateParams{ID: uuid.New(), OwnerID: ownerID, Name: "Backend", ModelID: "claude-opus-4-6",
		SystemPrompt: "You write Go.", AllowedTools: []string{"Read", "Edit", "Bash"},
		DefaultBudget: domain.SessionBudget{HardCapUsd: domain.Dollars(5)}, Now: t0}
}

func TestMCPToolDefinition(t *testing.T) {
	t.Parallel()
	const obj = `{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`
	tests := []struct {
		name, toolName, desc, schema, uri string
		wantField                         string
	}{
		{"valid", "search", "searches", obj, "https://mcp.example.com/sse", ""},
		{"stdio uri", "search", "searches", obj, "stdio:///usr/local/bin/mcp-search", ""},
		{"empty name", "", "searches", obj, "https://x", "name"},
		{"long name", string(make([]byte, 101)), "d", obj, "https://x", "name"},
		{"no description", "search", "", obj, "https://x", "description"},
		{"not json", "search", "d", `{"type":`, "https://x", "inputSchema"},
		{"not an object schema", "search", "d", `{"type":"string"}`, "https://x", "inputSchema"},
		{"invalid schema", "search", "d", `{"type":"object","properties":{"q":{"type":"strange"}}}`, "https://x", "inputSchema"},
		{"invalid schema keyword value", "search", "d", `{"type":"object","required":"q"}`, "https://x", "inputSchema"},
		{"remote reference", "search", "d", `{"type":"object","properties":{"q":{"$ref":"https://evil.example.com/s.json"}}}`, "https://x", "inputSchema"},
		{"relative uri", "search", "d", obj, "/mcp", "serverUri"},
		{"no scheme", "search", "d", obj, "mcp.example.com", "serverUri"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := domain.NewMCPToolDefinition(tt.toolName, tt.desc, tt.schema, tt.uri)
			if tt.wantField == "" {
				require.NoError(t, err)
				return
			}
			var ve *domain.ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, tt.wantField, ve.Field())
		})
	}
}

func TestCronAndTimeZone(t *testing.T) {
	t.Parallel()
	valid := []string{"* * * * *", "0 9 * * MON-FRI", "*/15 8-18 * * 1-5", "0 0 1,15 * *", "30 6 * jan,jul sun", "0 0 * * 0", "5-10/2 * * * *"}
	for _, expr := range valid {
		assert.NoError(t, domain.ValidateCron(expr), expr)
	}
	invalid := []string{"", "* * * *", "* * * * * *", "@daily", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *", "* * * * 8", "* * * * 7", "0 0 * * 5-7", "? * * * *", "CRON_TZ=UTC 0 0 * * *",
		"*/0 * * * *", "10-5 * * * *", "a * * * *", "1,,2 * * * *", "* * * FOO *"}
	for _, expr := range invalid {
		assert.ErrorIs(t, domain.ValidateCron(expr), domain.ErrValidation, expr)
	}
	for _, tz := range []string{"Europe/Lisbon", "America/New_York", "UTC", "Asia/Kolkata"} {
		assert.NoError(t, domain.ValidateTimeZone(tz), tz)
	}
	for _, tz := range []string{"", "Local", "Mars/Olympus", "../etc/passwd", "+01:00"} {
		assert.ErrorIs(t, domain.ValidateTimeZone(tz), domain.ErrValidation, tz)
	}
}

func TestNewAgentTemplate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		mutate    func(*domain.NewTemplateParams)
		wantField string
	}{
		{"valid", func(p *domain.NewTemplateParams) {}, ""},
		{"scheduled automation", func(p *domain.NewTemplateParams) {
			p.Schedule = &domain.AgentSchedule{CronExpression: "0 7 * * 1-5", TimeZone: "Europe/Lisbon", IsEnabled: true}
			p.ClassificationRules = []domain.ClassificationRule{{ID: uuid.New(), MatchField: "from", MatchPattern: "@bank", ClassifyAs: "finance"}}
		}, ""},
		{"no name", func(p *domain.NewTemplateParams) { p.Name = "" }, "name"},
		{"no model", func(p *domain.NewTemplateParams) { p.ModelID = "" }, "modelId"},
		{"no allowed tools", func(p *domain.NewTemplateParams) { p.AllowedTools = nil }, "allowedTools"},
		{"zero budget", func(p *domain.NewTemplateParams) { p.DefaultBudget.HardCapUsd = 0 }, "budget.hardCapUsd"},
		{"bad cron", func(p *domain.NewTemplateParams) {
			p.Schedule = &domain.AgentSchedule{CronExpression: "0 7 * *", TimeZone: "UTC"}
		}, "schedule.cronExpression"},
		{"bad time zone", func(p *domain.NewTemplateParams) {
			p.Schedule = &domain.AgentSchedule{CronExpression: "0 7 * * *", TimeZone: "Nowhere/City"}
		}, "schedule.timeZone"},
		{"rule without pattern", func(p *domain.NewTemplateParams) {
			p.ClassificationRules = []domain.ClassificationRule{{ID: uuid.New(), MatchField: "from"}}
		}, "classificationRules.matchPattern"},
		{"duplicate tool", func(p *domain.NewTemplateParams) {
			tool := mustTool(t, "search")
			p.CustomTools = []domain.MCPToolDefinition{tool, tool}
		}, "customToolDefinitions"},
		{"bad permission timeout", func(p *domain.NewTemplateParams) {
			p.ToolApproval = &domain.ToolApprovalPolicy{Mode: domain.ApprovalAll, OnTimeout: domain.TimeoutDeny}
		}, "toolApproval.timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := templateParams()
			tt.mutate(&p)
			tmpl, err := domain.NewAgentTemplate(p)
			if tt.wantField != "" {
				var ve *domain.ValidationError
				require.ErrorAs(t, err, &ve)
				assert.Equal(t, tt.wantField, ve.Field())
				return
			}
			require.NoError(t, err)
			assert.True(t, tmpl.IsActive())
			assert.Equal(t, domain.DefaultWarnAtPercent, tmpl.DefaultBudget().WarnAtPercent)
			assert.Equal(t, []string{"agent_template_created"}, eventTypes(tmpl.PopEvents()))
		})
	}
}

func TestAgentTemplateChanges(t *testing.T) {
	t.Parallel()
	tmpl, err := domain.NewAgentTemplate(templateParams())
	require.NoError(t, err)
	skill, rule := uuid.New(), domain.ClassificationRule{ID: uuid.New(), MatchField: "subject", MatchPattern: "invoice"}

	require.NoError(t, tmpl.AddDefaultSkill(skill, t0))
	require.ErrorIs(t, tmpl.AddDefaultSkill(skill, t0), domain.ErrDuplicate)
	require.NoError(t, tmpl.AddClassificationRule(rule, t0))
	require.ErrorIs(t, tmpl.AddClassificationRule(rule, t0), domain.ErrDuplicate, "rule ids are unique")
	require.NoError(t, tmpl.AddCustomToolDefinition(mustTool(t, "search"), t0))
	require.ErrorIs(t, tmpl.AddCustomToolDefinition(mustTool(t, "search"), t0), domain.ErrDuplicate, "tool names are unique")
	require.NoError(t, tmpl.UpdateSchedule(&domain.AgentSchedule{CronExpression: "0 * * * *", TimeZone: "UTC"}, t0))
	require.ErrorIs(t, tmpl.UpdateSchedule(&domain.AgentSchedule{CronExpression: "0 * * * *", TimeZone: "Local"}, t0), domain.ErrValidation)

	approval := true
	name := ""
	require.ErrorIs(t, tmpl.Update(domain.TemplateUpdate{PlanApprovalRequired: &approval, Name: &name}, t0), domain.ErrValidation)
	assert.False(t, tmpl.PlanApprovalRequired(), "a refused update changes nothing")
	timeouts := domain.SessionTimeouts{Input: time.Hour, Pause: time.Hour, DefaultAnswer: "go ahead"}
	require.NoError(t, tmpl.Update(domain.TemplateUpdate{PlanApprovalRequired: &approval, Timeouts: &timeouts}, t0))
	assert.True(t, tmpl.PlanApprovalRequired())
	assert.Equal(t, timeouts, tmpl.Timeouts())

	require.NoError(t, tmpl.RemoveDefaultSkill(skill, t0))
	require.ErrorIs(t, tmpl.RemoveDefaultSkill(skill, t0), domain.ErrNotFound)
	require.NoError(t, tmpl.RemoveClassificationRule(rule.ID, t0))
	require.NoError(t, tmpl.RemoveCustomToolDefinition("search", t0))
	require.NoError(t, tmpl.UpdateSchedule(nil, t0))
	assert.Nil(t, tmpl.Schedule())

	require.NoError(t, tmpl.Deactivate(t0))
	require.ErrorIs(t, tmpl.Deactivate(t0), domain.ErrInvalidTransition)
	require.NoError(t, tmpl.Activate(t0))

	re, err := domain.UnmarshalAgentTemplateFromDatabase(tmpl.Snapshot())
	require.NoError(t, err)
	assert.Equal(t, tmpl.Snapshot(), re.Snapshot())
}

// TestScheduleSinceMovesOnlyWithTheSchedule: the scheduler starts no due
// time before it, so only setting or changing the schedule, or activating
// the template, moves it; another edit leaves the due times it passed due.
func TestScheduleSinceMovesOnlyWithTheSchedule(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2027, 3, 1, 8, 0, 0, 0, time.UTC)
	p := templateParams()
	p.Schedule, p.Now = &domain.AgentSchedule{CronExpression: "0 * * * *", TimeZone: "UTC", IsEnabled: true}, t0
	tmpl, err := domain.NewAgentTemplate(p)
	require.NoError(t, err)
	assert.Equal(t, t0, tmpl.ScheduleSince())

	name := "Renamed"
	require.NoError(t, tmpl.Update(domain.TemplateUpdate{Name: &name}, t0.Add(time.Hour)))
	assert.Equal(t, t0, tmpl.ScheduleSince(), "an edit of something else")
	require.NoError(t, tmpl.UpdateSchedule(&domain.AgentSchedule{CronExpression: "0 * * * *", TimeZone: "UTC", IsEnabled: true}, t0.Add(2*time.Hour)))
	assert.Equal(t, t0.Add(2*time.Hour), tmpl.ScheduleSince(), "enabled again")
	require.NoError(t, tmpl.Deactivate(t0.Add(3*time.Hour)))
	require.NoError(t, tmpl.Activate(t0.Add(4*time.Hour)))
	assert.Equal(t, t0.Add(4*time.Hour), tmpl.ScheduleSince(), "activated again")

	stored, err := domain.UnmarshalAgentTemplateFromDatabase(tmpl.Snapshot())
	require.NoError(t, err)
	assert.Equal(t, t0.Add(4*time.Hour), stored.ScheduleSince())
	old := tmpl.Snapshot()
	old.ScheduleSince = time.Time{}
	stored, err = domain.UnmarshalAgentTemplateFromDatabase(old)
	require.NoError(t, err)
	assert.Equal(t, old.UpdatedAt, stored.ScheduleSince(), "a template stored before it was recorded")
}
