package api

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
)

// pill records a memory pill on u's skill, as an agent of session does.
func (st *stack) pill(t testing.TB, u user, skill, session uuid.UUID, content string) uuid.UUID {
	t.Helper()
	id := uuid.New()
	cmd, err := command.New(domain.AggregateSkill, command.RecordMemoryPill, skill, u.id.String(),
		command.RecordMemoryPillData{PillID: id, SessionID: session, Content: content, Category: domain.PillTip})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := st.client.Do(ctx, cmd)
	require.NoError(t, err)
	require.Nil(t, res.Error, "record pill: %v", res.Error)
	return id
}

// toolBody is a valid MCP tool.
func toolBody(name string) map[string]any {
	return map[string]any{"name": name, "description": "Searches the support tickets.", "serverUri": "https://mcp.example.com/tickets",
		"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"query": map[string]any{"type": "string"}}}}
}

// with returns a copy of body with key set to value.
func with(body map[string]any, key string, value any) map[string]any {
	out := make(map[string]any, len(body)+1)
	for k, v := range body {
		out[k] = v
	}
	out[key] = value
	return out
}

func skillBody(name string) map[string]any {
	return map[string]any{"name": name, "description": "How we retry HTTP calls.", "instructions": "Retry idempotent requests only.",
		"toolDefinitions": []any{toolBody("search_tickets")},
		"subAgentDefinitions": []any{map[string]any{"name": "test-runner", "modelId": "claude-haiku-4-5",
			"toolDefinitions": []any{toolBody("run_tests")}}}}
}

func TestCreateSkill(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{}, true)
	alice, bob := newUser(t), newUser(t)

	resp := st.call(t, http.MethodPost, "/api/agents/skills", skillBody("HTTP retries"), alice.auth)
	require.Equal(t, http.StatusCreated, resp.Code, resp.String())
	sk := decode[SkillDetail](t, resp)
	assert.Equal(t, "/api/agents/skills/"+sk.ID.String(), resp.Header.Get("Location"))
	assert.Equal(t, alice.id, sk.OwnerID)
	assert.Equal(t, 1, sk.Version)
	assert.True(t, sk.IsActive)
	assert.Equal(t, "Retry idempotent requests only.", sk.Instructions)
	require.Len(t, sk.ToolDefinitions, 1)
	assert.Equal(t, toolBody("search_tickets")["inputSchema"], sk.ToolDefinitions[0].InputSchema)
	require.Len(t, sk.SubAgentDefinitions, 1)
	assert.Equal(t, "run_tests", sk.SubAgentDefinitions[0].ToolDefinitions[0].Name)
	assert.Empty(t, sk.MemoryPills)
	assert.Equal(t, sk, decode[SkillDetail](t, st.call(t, http.MethodGet, "/api/agents/skills/"+sk.ID.String(), nil, alice.auth)))

	requireConflict(t, st.call(t, http.MethodPost, "/api/agents/skills", skillBody("http RETRIES"), alice.auth), "")
	other := st.call(t, http.MethodPost, "/api/agents/skills", skillBody("HTTP retries"), bob.auth)
	require.Equal(t, http.StatusCreated, other.Code, "names are unique per owner: %s", other.String())

	for name, c := range map[string]struct {
		body     map[string]any
		location string
	}{
		"name too long":       {with(skillBody("a"), "name", strings.Repeat("n", 101)), "body.name"},
		"no description":      {with(skillBody("b"), "description", ""), "body.description"},
		"blank name":          {with(skillBody("c"), "name", "   "), "body.name"},
		"schema not object":   {with(skillBody("d"), "toolDefinitions", []any{with(toolBody("x"), "inputSchema", map[string]any{"type": "string"})}), "body.toolDefinitions[0].inputSchema"},
		"schema invalid":      {with(skillBody("e"), "toolDefinitions", []any{with(toolBody("x"), "inputSchema", map[string]any{"type": "object", "minProperties": "two"})}), "body.toolDefinitions[0].inputSchema"},
		"relative server URI": {with(skillBody("f"), "toolDefinitions", []any{with(toolBody("x"), "serverUri", "tickets")}), "body.toolDefinitions[0].serverUri"},
		"metadata server URI": {with(skillBody("g"), "toolDefinitions", []any{toolBody("ok"), with(toolBody("x"), "serverUri", "http://169.254.169.254/latest")}), "body.toolDefinitions[1].serverUri"},
		"stdio server URI":    {with(skillBody("h"), "toolDefinitions", []any{with(toolBody("x"), "serverUri", "stdio:///usr/bin/lint-mcp")}), "body.toolDefinitions[0].serverUri"},
		"loopback subagent server URI": {with(skillBody("i"), "subAgentDefinitions", []any{map[string]any{"name": "runner", "modelId": "claude-haiku-4-5",
			"toolDefinitions": []any{with(toolBody("x"), "serverUri", "http://localhost:9000/mcp")}}}), "body.subAgentDefinitions[0].toolDefinitions[0].serverUri"},
	} {
		t.Run(name, func(t *testing.T) {
			requireInvalid(t, st.call(t, http.MethodPost, "/api/agents/skills", c.body, alice.auth), c.location)
		})
	}
	list := decode[SkillList](t, st.call(t, http.MethodGet, "/api/agents/skills", nil, alice.auth))
	assert.Equal(t, 1, list.Total, "nothing refused was created")
}

func TestSkillCatalog(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{}, true)
	alice, bob := newUser(t), newUser(t)
	retries := st.skill(t, alice, "retries")
	logging := st.skill(t, alice, "logging")
	theirs := st.skill(t, bob, "theirs")
	url := func(id uuid.UUID) string { return "/api/agents/skills/" + id.String() }

	t.Run("list", func(t *testing.T) {
		resp := st.call(t, http.MethodGet, "/api/agents/skills", nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		list := decode[SkillList](t, resp)
		assert.Equal(t, 2, list.Total)
		require.Len(t, list.Items, 2)
		assert.Equal(t, "logging", list.Items[0].Name, "by name")
		assert.Equal(t, retries, list.Items[1].ID)
		assert.Equal(t, 1, list.Items[1].Version)
		assert.True(t, list.Items[1].IsActive)

		requireInvalid(t, st.call(t, http.MethodGet, "/api/agents/skills?isActive=maybe", nil, alice.auth), "query.isActive")
		requireInvalid(t, st.call(t, http.MethodGet, "/api/agents/skills?page=0", nil, alice.auth), "query.page")
	})

	t.Run("get", func(t *testing.T) {
		resp := st.call(t, http.MethodGet, url(retries), nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		assert.Equal(t, "retries", decode[SkillDetail](t, resp).Name)
		requireNotFound(t, st.call(t, http.MethodGet, url(theirs), nil, alice.auth))
		requireNotFound(t, st.call(t, http.MethodGet, url(uuid.New()), nil, alice.auth))
		requireInvalid(t, st.call(t, http.MethodGet, "/api/agents/skills/x", nil, alice.auth), "path.id")
	})

	t.Run("update", func(t *testing.T) {
		resp := st.call(t, http.MethodPut, url(retries), map[string]any{"description": "Backoff and jitter.", "instructions": "Use jitter."}, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		sk := decode[SkillDetail](t, resp)
		assert.Equal(t, "retries", sk.Name, "left out, kept")
		assert.Equal(t, "Backoff and jitter.", sk.Description)
		assert.Equal(t, "Use jitter.", sk.Instructions)
		assert.Equal(t, 1, sk.Version, "a manual edit keeps the version")

		requireInvalid(t, st.call(t, http.MethodPut, url(retries), map[string]any{"name": strings.Repeat("n", 101)}, alice.auth), "body.name")
		requireInvalid(t, st.call(t, http.MethodPut, url(retries), map[string]any{}, alice.auth), "body.name")
		requireConflict(t, st.call(t, http.MethodPut, url(retries), map[string]any{"name": "Logging"}, alice.auth), "")
		requireNotFound(t, st.call(t, http.MethodPut, url(theirs), map[string]any{"name": "mine"}, alice.auth))
	})

	t.Run("deactivate and activate", func(t *testing.T) {
		resp := st.call(t, http.MethodPost, url(logging)+"/deactivate", nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		assert.False(t, decode[SkillDetail](t, resp).IsActive)
		requireConflict(t, st.call(t, http.MethodPost, url(logging)+"/deactivate", nil, alice.auth), "Inactive")

		inactive := decode[SkillList](t, st.call(t, http.MethodGet, "/api/agents/skills?isActive=false", nil, alice.auth))
		require.Len(t, inactive.Items, 1)
		assert.Equal(t, logging, inactive.Items[0].ID)

		resp = st.call(t, http.MethodPost, url(logging)+"/activate", nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		assert.True(t, decode[SkillDetail](t, resp).IsActive)
		requireConflict(t, st.call(t, http.MethodPost, url(logging)+"/activate", nil, alice.auth), "Active")

		for _, op := range []string{"/deactivate", "/activate"} {
			requireNotFound(t, st.call(t, http.MethodPost, url(theirs)+op, nil, alice.auth))
			requireInvalid(t, st.call(t, http.MethodPost, "/api/agents/skills/x"+op, nil, alice.auth), "path.id")
		}
	})
}

func TestMemoryPills(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{}, true)
	alice, bob := newUser(t), newUser(t)
	skill := st.skill(t, alice, "retries")
	s, _ := st.running(t, alice, nil)
	first := st.pill(t, alice, skill, s.ID, "The payments API allows 10 requests per second.")
	second := st.pill(t, alice, skill, s.ID, "Use the sandbox key in tests.")
	url := "/api/agents/skills/" + skill.String() + "/memory-pills"

	resp := st.call(t, http.MethodGet, url, nil, alice.auth)
	require.Equal(t, http.StatusOK, resp.Code, resp.String())
	list := decode[MemoryPillList](t, resp)
	assert.Equal(t, 2, list.Total)
	require.Len(t, list.Items, 2)
	assert.Equal(t, second, list.Items[0].ID, "newest first")
	assert.Equal(t, MemoryPill{ID: first, SkillID: skill, SessionID: s.ID, Content: "The payments API allows 10 requests per second.",
		Category: "Tip", Status: "Active", CreatedAt: list.Items[1].CreatedAt}, list.Items[1])

	resp = st.call(t, http.MethodDelete, url+"/"+first.String(), nil, alice.auth)
	require.Equal(t, http.StatusOK, resp.Code, resp.String())
	sk := decode[SkillDetail](t, resp)
	require.Len(t, sk.MemoryPills, 2)
	assert.Equal(t, "Dismissed", sk.MemoryPills[0].Status)
	assert.NotNil(t, sk.MemoryPills[0].DismissedAt)

	active := decode[MemoryPillList](t, st.call(t, http.MethodGet, url+"?status=Active", nil, alice.auth))
	require.Len(t, active.Items, 1)
	assert.Equal(t, second, active.Items[0].ID)
	dismissed := decode[MemoryPillList](t, st.call(t, http.MethodGet, url+"?status=Dismissed", nil, alice.auth))
	require.Len(t, dismissed.Items, 1)
	assert.Equal(t, first, dismissed.Items[0].ID)

	requireConflict(t, st.call(t, http.MethodDelete, url+"/"+first.String(), nil, alice.auth), "Dismissed")
	requireNotFound(t, st.call(t, http.MethodDelete, url+"/"+uuid.NewString(), nil, alice.auth))
	requireNotFound(t, st.call(t, http.MethodDelete, url+"/"+second.String(), nil, bob.auth))
	requireInvalid(t, st.call(t, http.MethodDelete, url+"/x", nil, alice.auth), "path.pillId")
	requireNotFound(t, st.call(t, http.MethodGet, url, nil, bob.auth))
	requireInvalid(t, st.call(t, http.MethodGet, url+"?status=Gone", nil, alice.auth), "query.status")
	requireInvalid(t, st.call(t, http.MethodGet, "/api/agents/skills/x/memory-pills", nil, alice.auth), "path.id")
}

func TestConsolidateSkill(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{}, true)
	alice, bob := newUser(t), newUser(t)
	skill := st.skill(t, alice, "retries")
	s, _ := st.running(t, alice, nil)
	dismissed := st.pill(t, alice, skill, s.ID, "Dismissed learning.")
	require.Equal(t, http.StatusOK, st.call(t, http.MethodDelete,
		"/api/agents/skills/"+skill.String()+"/memory-pills/"+dismissed.String(), nil, alice.auth).Code)
	kept := st.pill(t, alice, skill, s.ID, "The payments API allows 10 requests per second.")
	body := map[string]any{"workingDirectory": "src/shop", "budgetCapUsd": 2}
	url := func(id uuid.UUID) string { return "/api/agents/skills/" + id.String() + "/consolidate" }

	resp := st.call(t, http.MethodPost, url(skill), body, alice.auth)
	require.Equal(t, http.StatusCreated, resp.Code, resp.String())
	c := decode[Consolidation](t, resp)
	assert.Equal(t, skill, c.SkillID)
	assert.Equal(t, []uuid.UUID{kept}, c.PillIDs, "only the Active pills")
	assert.NotEmpty(t, c.APIKey)
	assert.Equal(t, "/api/agents/sessions/"+c.Session.ID.String(), resp.Header.Get("Location"))
	assert.Equal(t, "Queued", c.Session.Status)
	assert.Equal(t, []uuid.UUID{skill}, c.Session.EnabledSkillIDs)
	assert.Contains(t, c.Session.Objective, "Skill improvement")
	assert.Contains(t, c.Session.Objective, "10 requests per second")
	assert.NotContains(t, c.Session.Objective, "Dismissed learning")
	assert.Equal(t, 2.0, c.Session.Budget.HardCapUsd)
	job, ok, err := postgres.ConsolidationOf(context.Background(), st.db, c.Session.ID)
	require.NoError(t, err)
	require.True(t, ok, "the session is recorded as the skill's consolidation")
	assert.Equal(t, skill, job.SkillID)
	assert.Equal(t, []uuid.UUID{kept}, job.PillIDs)

	key := "Idempotency-Key: " + uuid.NewString()
	first := decode[Consolidation](t, st.call(t, http.MethodPost, url(skill), body, alice.auth, key))
	again := st.call(t, http.MethodPost, url(skill), body, alice.auth, key)
	require.Equal(t, http.StatusCreated, again.Code, again.String())
	repeat := decode[Consolidation](t, again)
	assert.Equal(t, first.Session.ID, repeat.Session.ID, "a repeat with the same key starts no second session")
	assert.Empty(t, repeat.APIKey, "the key is shown once")

	requireInvalid(t, st.call(t, http.MethodPost, url(skill), with(body, "budgetCapUsd", 0), alice.auth), "body.budgetCapUsd")
	requireInvalid(t, st.call(t, http.MethodPost, url(skill), with(body, "workingDirectory", "/"), alice.auth), "body.workingDirectory")
	requireInvalid(t, st.call(t, http.MethodPost, url(skill), with(body, "workingDirectory", "../"+bob.id.String()), alice.auth), "body.workingDirectory")
	requireNotFound(t, st.call(t, http.MethodPost, url(skill), body, bob.auth))
	requireNotFound(t, st.call(t, http.MethodPost, url(uuid.New()), body, alice.auth))

	empty := st.skill(t, alice, "empty")
	requireConflict(t, st.call(t, http.MethodPost, url(empty), body, alice.auth), "Active")
	require.Equal(t, http.StatusOK, st.call(t, http.MethodPost, "/api/agents/skills/"+skill.String()+"/deactivate", nil, alice.auth).Code)
	requireConflict(t, st.call(t, http.MethodPost, url(skill), body, alice.auth), "Inactive")
}
