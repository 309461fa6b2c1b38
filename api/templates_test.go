package api

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func templateBody(name string) map[string]any {
	return map[string]any{"name": name, "modelId": "claude-sonnet-4-5", "allowedTools": []string{"Read", "Edit", "Bash"},
		"defaultBudgetCapUsd": 10}
}

// template creates a template of u through the API.
func (st *stack) template(t *testing.T, u user, body map[string]any) TemplateDetail {
	t.Helper()
	resp := st.call(t, http.MethodPost, "/api/agents/templates", body, u.auth)
	require.Equal(t, http.StatusCreated, resp.Code, resp.String())
	return decode[TemplateDetail](t, resp)
}

func TestCreateTemplate(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{}, true)
	alice, bob := newUser(t), newUser(t)
	skill, theirs := st.skill(t, alice, "retries"), st.skill(t, bob, "theirs")

	body := templateBody("Email triage")
	body["description"] = "Sorts the inbox."
	body["systemPrompt"] = "Be brief."
	body["warnAtPercent"] = 90
	body["customToolDefinitions"] = []any{toolBody("search_tickets")}
	body["defaultSkillIds"] = []string{skill.String()}
	body["planApprovalRequired"] = true
	body["classificationRules"] = []any{map[string]any{"matchField": "subject", "matchPattern": "(?i)invoice", "classifyAs": "billing"}}
	body["schedule"] = map[string]any{"cronExpression": "0 8 * * 1-5", "timeZone": "Europe/Lisbon", "isEnabled": true}
	body["toolApproval"] = map[string]any{"mode": "List", "tools": []string{"Bash"}}
	body["timeouts"] = map[string]any{"inputSeconds": 3600}
	resp := st.call(t, http.MethodPost, "/api/agents/templates", body, alice.auth)
	require.Equal(t, http.StatusCreated, resp.Code, resp.String())
	tp := decode[TemplateDetail](t, resp)
	assert.Equal(t, "/api/agents/templates/"+tp.ID.String(), resp.Header.Get("Location"))
	assert.Equal(t, alice.id, tp.OwnerID)
	assert.True(t, tp.IsActive)
	assert.Equal(t, []string{"Read", "Edit", "Bash"}, tp.AllowedTools)
	assert.Equal(t, 10.0, tp.DefaultBudgetCapUsd)
	assert.Equal(t, 90, tp.WarnAtPercent)
	assert.Equal(t, []uuid.UUID{skill}, tp.DefaultSkillIDs)
	require.Len(t, tp.CustomToolDefinitions, 1)
	assert.Equal(t, "search_tickets", tp.CustomToolDefinitions[0].Name)
	require.Len(t, tp.ClassificationRules, 1)
	assert.Equal(t, "billing", tp.ClassificationRules[0].ClassifyAs)
	assert.NotEqual(t, uuid.Nil, tp.ClassificationRules[0].ID)
	assert.Equal(t, &Schedule{CronExpression: "0 8 * * 1-5", TimeZone: "Europe/Lisbon", IsEnabled: true}, tp.Schedule)
	assert.Equal(t, ToolApproval{Mode: "List", Tools: []string{"Bash"}, TimeoutSeconds: 120, OnTimeout: "Deny"}, tp.ToolApproval)
	assert.Equal(t, Timeouts{InputSeconds: 3600, PauseSeconds: 600}, tp.Timeouts)
	assert.Equal(t, tp, decode[TemplateDetail](t, st.call(t, http.MethodGet, "/api/agents/templates/"+tp.ID.String(), nil, alice.auth)))

	key := "Idempotency-Key: " + uuid.NewString()
	minimal := decode[TemplateDetail](t, st.call(t, http.MethodPost, "/api/agents/templates", templateBody("Plain"), alice.auth, key))
	again := decode[TemplateDetail](t, st.call(t, http.MethodPost, "/api/agents/templates", templateBody("Plain"), alice.auth, key))
	assert.Equal(t, minimal, again, "a repeat with the same key creates nothing more")
	assert.Equal(t, 80, minimal.WarnAtPercent, "the default threshold")
	assert.Nil(t, minimal.Schedule)
	assert.Equal(t, "None", minimal.ToolApproval.Mode)

	requireNotFound(t, st.call(t, http.MethodPost, "/api/agents/templates",
		with(templateBody("Theirs"), "defaultSkillIds", []string{theirs.String()}), alice.auth))

	badTool := func(key string, value any) []any { return []any{with(toolBody("x"), key, value)} }
	for name, c := range map[string]struct {
		body     map[string]any
		location string
	}{
		"name too long":       {with(templateBody("a"), "name", strings.Repeat("n", 101)), "body.name"},
		"no allowed tools":    {with(templateBody("b"), "allowedTools", []string{}), "body.allowedTools"},
		"no budget":           {with(templateBody("c"), "defaultBudgetCapUsd", 0), "body.defaultBudgetCapUsd"},
		"unknown approval":    {with(templateBody("d"), "toolApproval", map[string]any{"mode": "Some"}), "body.toolApproval.mode"},
		"bad cron":            {with(templateBody("e"), "schedule", map[string]any{"cronExpression": "every day", "timeZone": "UTC", "isEnabled": true}), "body.schedule.cronExpression"},
		"bad cron minute":     {with(templateBody("f"), "schedule", map[string]any{"cronExpression": "61 * * * *", "timeZone": "UTC", "isEnabled": true}), "body.schedule.cronExpression"},
		"unknown time zone":   {with(templateBody("g"), "schedule", map[string]any{"cronExpression": "0 8 * * *", "timeZone": "Mars/Olympus", "isEnabled": true}), "body.schedule.timeZone"},
		"schema not object":   {with(templateBody("h"), "customToolDefinitions", badTool("inputSchema", map[string]any{"type": "array"})), "body.customToolDefinitions[0].inputSchema"},
		"relative server URI": {with(templateBody("i"), "customToolDefinitions", badTool("serverUri", "/tickets")), "body.customToolDefinitions[0].serverUri"},
		"metadata server URI": {with(templateBody("k"), "customToolDefinitions", badTool("serverUri", "http://metadata.google.internal/computeMetadata/v1/")), "body.customToolDefinitions[0].serverUri"},
		"private server URI":  {with(templateBody("l"), "customToolDefinitions", badTool("serverUri", "https://10.0.0.5/mcp")), "body.customToolDefinitions[0].serverUri"},
		"blank rule pattern":  {with(templateBody("j"), "classificationRules", []any{map[string]any{"matchField": "subject", "matchPattern": " ", "classifyAs": "x"}}), "body.classificationRules.matchPattern"},
	} {
		t.Run(name, func(t *testing.T) {
			requireInvalid(t, st.call(t, http.MethodPost, "/api/agents/templates", c.body, alice.auth), c.location)
		})
	}
	list := decode[TemplateList](t, st.call(t, http.MethodGet, "/api/agents/templates", nil, alice.auth))
	assert.Equal(t, 2, list.Total, "nothing refused was created")
	assert.Equal(t, 0, decode[TemplateList](t, st.call(t, http.MethodGet, "/api/agents/templates", nil, bob.auth)).Total)
}

func TestTemplateCatalog(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{}, true)
	alice, bob := newUser(t), newUser(t)
	tp := st.template(t, alice, templateBody("Backend"))
	other := st.template(t, alice, templateBody("Automation"))
	theirs := st.template(t, bob, templateBody("Theirs"))
	url := func(id uuid.UUID) string { return "/api/agents/templates/" + id.String() }

	t.Run("list", func(t *testing.T) {
		resp := st.call(t, http.MethodGet, "/api/agents/templates", nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		list := decode[TemplateList](t, resp)
		require.Len(t, list.Items, 2)
		assert.Equal(t, "Automation", list.Items[0].Name, "by name")
		assert.Equal(t, TemplateSummary{ID: tp.ID, Name: "Backend", ModelID: "claude-sonnet-4-5", IsActive: true,
			DefaultBudgetCapUsd: 10, AllowedToolCount: 3, CreatedAt: tp.CreatedAt, UpdatedAt: tp.UpdatedAt}, list.Items[1])
		requireInvalid(t, st.call(t, http.MethodGet, "/api/agents/templates?isActive=yes", nil, alice.auth), "query.isActive")
	})

	t.Run("get", func(t *testing.T) {
		requireNotFound(t, st.call(t, http.MethodGet, url(theirs.ID), nil, alice.auth))
		requireNotFound(t, st.call(t, http.MethodGet, url(uuid.New()), nil, alice.auth))
		requireInvalid(t, st.call(t, http.MethodGet, "/api/agents/templates/x", nil, alice.auth), "path.id")
	})

	t.Run("update", func(t *testing.T) {
		resp := st.call(t, http.MethodPut, url(tp.ID), map[string]any{"name": "Backend work", "defaultBudgetCapUsd": 15,
			"schedule": map[string]any{"cronExpression": "30 6 * * *", "timeZone": "UTC", "isEnabled": true}}, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		got := decode[TemplateDetail](t, resp)
		assert.Equal(t, "Backend work", got.Name)
		assert.Equal(t, 15.0, got.DefaultBudgetCapUsd)
		assert.Equal(t, 80, got.WarnAtPercent, "the other half of the budget is kept")
		assert.Equal(t, "claude-sonnet-4-5", got.ModelID, "left out, kept")
		require.NotNil(t, got.Schedule)
		assert.Greater(t, got.Version, tp.Version)

		resp = st.call(t, http.MethodPut, url(tp.ID), map[string]any{"removeSchedule": true}, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		assert.Nil(t, decode[TemplateDetail](t, resp).Schedule)

		requireInvalid(t, st.call(t, http.MethodPut, url(tp.ID), map[string]any{}, alice.auth), "body.name")
		requireInvalid(t, st.call(t, http.MethodPut, url(tp.ID), map[string]any{"allowedTools": []string{}}, alice.auth), "body.allowedTools")
		requireInvalid(t, st.call(t, http.MethodPut, url(tp.ID), map[string]any{"schedule": map[string]any{
			"cronExpression": "* * *", "timeZone": "UTC", "isEnabled": true}}, alice.auth), "body.schedule.cronExpression")
		requireInvalid(t, st.call(t, http.MethodPut, url(tp.ID), map[string]any{"timeouts": map[string]any{"pauseSeconds": 0, "inputSeconds": -1}}, alice.auth), "body.timeouts.inputSeconds")
		requireNotFound(t, st.call(t, http.MethodPut, url(theirs.ID), map[string]any{"name": "mine"}, alice.auth))
		assert.Equal(t, "Backend work", decode[TemplateDetail](t, st.call(t, http.MethodGet, url(tp.ID), nil, alice.auth)).Name,
			"refused updates change nothing")
	})

	t.Run("rules", func(t *testing.T) {
		rule := map[string]any{"matchField": "from", "matchPattern": "@bank.example", "classifyAs": "finance", "minPriority": "High"}
		resp := st.call(t, http.MethodPost, url(tp.ID)+"/rules", rule, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		rules := decode[TemplateDetail](t, resp).ClassificationRules
		require.Len(t, rules, 1)
		assert.Equal(t, Rule{ID: rules[0].ID, MatchField: "from", MatchPattern: "@bank.example", ClassifyAs: "finance", MinPriority: "High"}, rules[0])

		requireInvalid(t, st.call(t, http.MethodPost, url(tp.ID)+"/rules", with(rule, "matchField", ""), alice.auth), "body.matchField")
		requireInvalid(t, st.call(t, http.MethodPost, url(tp.ID)+"/rules", with(rule, "matchPattern", "  "), alice.auth), "body.matchPattern")
		requireNotFound(t, st.call(t, http.MethodPost, url(theirs.ID)+"/rules", rule, alice.auth))

		ruleURL := url(tp.ID) + "/rules/" + rules[0].ID.String()
		requireNotFound(t, st.call(t, http.MethodDelete, url(theirs.ID)+"/rules/"+rules[0].ID.String(), nil, alice.auth))
		resp = st.call(t, http.MethodDelete, ruleURL, nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		assert.Empty(t, decode[TemplateDetail](t, resp).ClassificationRules)
		requireNotFound(t, st.call(t, http.MethodDelete, ruleURL, nil, alice.auth))
		requireInvalid(t, st.call(t, http.MethodDelete, url(tp.ID)+"/rules/x", nil, alice.auth), "path.ruleId")
	})

	t.Run("tools", func(t *testing.T) {
		resp := st.call(t, http.MethodPost, url(tp.ID)+"/tools", toolBody("search_tickets"), alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		tools := decode[TemplateDetail](t, resp).CustomToolDefinitions
		require.Len(t, tools, 1)
		assert.Equal(t, ToolDefinition{Name: "search_tickets", Description: "Searches the support tickets.",
			InputSchema: toolBody("")["inputSchema"].(map[string]any), ServerURI: "https://mcp.example.com/tickets"}, tools[0])

		requireConflict(t, st.call(t, http.MethodPost, url(tp.ID)+"/tools", toolBody("search_tickets"), alice.auth), "Active")
		requireInvalid(t, st.call(t, http.MethodPost, url(tp.ID)+"/tools", with(toolBody("x"), "inputSchema",
			map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": 7}}}), alice.auth), "body.inputSchema")
		requireInvalid(t, st.call(t, http.MethodPost, url(tp.ID)+"/tools", with(toolBody("x"), "serverUri", "no scheme"), alice.auth), "body.serverUri")
		requireInvalid(t, st.call(t, http.MethodPost, url(tp.ID)+"/tools", with(toolBody("x"), "serverUri", "http://[fe80::1]/mcp"), alice.auth), "body.serverUri")
		requireInvalid(t, st.call(t, http.MethodPost, url(tp.ID)+"/tools", with(toolBody("x"), "description", strings.Repeat("d", 501)), alice.auth), "body.description")
		requireNotFound(t, st.call(t, http.MethodPost, url(theirs.ID)+"/tools", toolBody("mine"), alice.auth))

		requireNotFound(t, st.call(t, http.MethodDelete, url(theirs.ID)+"/tools/search_tickets", nil, alice.auth))
		resp = st.call(t, http.MethodDelete, url(tp.ID)+"/tools/search_tickets", nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		assert.Empty(t, decode[TemplateDetail](t, resp).CustomToolDefinitions)
		requireNotFound(t, st.call(t, http.MethodDelete, url(tp.ID)+"/tools/search_tickets", nil, alice.auth))
	})

	t.Run("default skills", func(t *testing.T) {
		mine, bobs := st.skill(t, alice, "retries"), st.skill(t, bob, "theirs")
		skillURL := url(tp.ID) + "/skills/" + mine.String()
		resp := st.call(t, http.MethodPost, skillURL, nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		assert.Equal(t, []uuid.UUID{mine}, decode[TemplateDetail](t, resp).DefaultSkillIDs)

		requireConflict(t, st.call(t, http.MethodPost, skillURL, nil, alice.auth), "Active")
		requireNotFound(t, st.call(t, http.MethodPost, url(tp.ID)+"/skills/"+bobs.String(), nil, alice.auth))
		requireNotFound(t, st.call(t, http.MethodPost, url(theirs.ID)+"/skills/"+mine.String(), nil, alice.auth))
		requireInvalid(t, st.call(t, http.MethodPost, url(tp.ID)+"/skills/x", nil, alice.auth), "path.skillId")

		requireNotFound(t, st.call(t, http.MethodDelete, url(theirs.ID)+"/skills/"+mine.String(), nil, alice.auth))
		resp = st.call(t, http.MethodDelete, skillURL, nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		assert.Empty(t, decode[TemplateDetail](t, resp).DefaultSkillIDs)
		requireNotFound(t, st.call(t, http.MethodDelete, skillURL, nil, alice.auth))
	})

	t.Run("deactivate and activate", func(t *testing.T) {
		resp := st.call(t, http.MethodPost, url(other.ID)+"/deactivate", nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		assert.False(t, decode[TemplateDetail](t, resp).IsActive)
		requireConflict(t, st.call(t, http.MethodPost, url(other.ID)+"/deactivate", nil, alice.auth), "Inactive")

		inactive := decode[TemplateList](t, st.call(t, http.MethodGet, "/api/agents/templates?isActive=false", nil, alice.auth))
		require.Len(t, inactive.Items, 1)
		assert.Equal(t, other.ID, inactive.Items[0].ID)
		resp = st.call(t, http.MethodPost, "/api/agents/sessions", with(startBody(), "templateId", other.ID.String()), alice.auth)
		require.Equal(t, http.StatusConflict, resp.Code, "a deactivated template starts no session: %s", resp.String())

		resp = st.call(t, http.MethodPost, url(other.ID)+"/activate", nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		assert.True(t, decode[TemplateDetail](t, resp).IsActive)
		requireConflict(t, st.call(t, http.MethodPost, url(other.ID)+"/activate", nil, alice.auth), "Active")

		for _, op := range []string{"/deactivate", "/activate"} {
			requireNotFound(t, st.call(t, http.MethodPost, url(theirs.ID)+op, nil, alice.auth))
			requireInvalid(t, st.call(t, http.MethodPost, "/api/agents/templates/x"+op, nil, alice.auth), "path.id")
		}
	})
}

func TestTemplateShowsItsNextRunAt(t *testing.T) {
	t.Parallel()
	// A Monday, 07:00 in Lisbon (UTC in winter) and 08:00 in Berlin.
	now := time.Date(2027, 3, 1, 7, 0, 0, 0, time.UTC)
	st := newStack(t, Config{Now: func() time.Time { return now }}, true)
	alice := newUser(t)
	url := func(id uuid.UUID) string { return "/api/agents/templates/" + id.String() }
	get := func(id uuid.UUID) TemplateDetail {
		resp := st.call(t, http.MethodGet, url(id), nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		return decode[TemplateDetail](t, resp)
	}
	schedule := func(cron, tz string, enabled bool) map[string]any {
		return map[string]any{"cronExpression": cron, "timeZone": tz, "isEnabled": enabled}
	}

	lisbon := st.template(t, alice, with(templateBody("Lisbon"), "schedule", schedule("0 8 * * 1-5", "Europe/Lisbon", true)))
	require.NotNil(t, get(lisbon.ID).NextRunAt)
	assert.Equal(t, time.Date(2027, 3, 1, 8, 0, 0, 0, time.UTC), get(lisbon.ID).NextRunAt.UTC(), "08:00 in the template's zone")
	berlin := st.template(t, alice, with(templateBody("Berlin"), "schedule", schedule("0 8 * * 1-5", "Europe/Berlin", true)))
	assert.Equal(t, time.Date(2027, 3, 2, 7, 0, 0, 0, time.UTC), get(berlin.ID).NextRunAt.UTC(), "08:00 in Berlin has passed today")

	plain := st.template(t, alice, templateBody("On demand"))
	resp := st.call(t, http.MethodGet, url(plain.ID), nil, alice.auth)
	assert.Contains(t, resp.String(), `"nextRunAt":null`)
	disabled := st.template(t, alice, with(templateBody("Off"), "schedule", schedule("0 8 * * *", "UTC", false)))
	assert.Nil(t, get(disabled.ID).NextRunAt)

	resp = st.call(t, http.MethodPost, url(lisbon.ID)+"/deactivate", nil, alice.auth)
	require.Equal(t, http.StatusOK, resp.Code, resp.String())
	assert.Nil(t, get(lisbon.ID).NextRunAt, "a deactivated template starts nothing")
}
