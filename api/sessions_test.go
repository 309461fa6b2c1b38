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
	"github.com/agentbus/agentbus/handlers/commands"
)

func TestStartSession(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{}, true)
	alice := newUser(t)

	resp := st.call(t, http.MethodPost, "/api/agents/sessions", startBody(), alice.auth)
	require.Equal(t, http.StatusCreated, resp.Code, resp.String())
	out := decode[StartSessionResponse](t, resp)
	s := out.Session
	assert.True(t, strings.HasPrefix(out.APIKey, domain.APIKeyPrefix), "the agent key is returned once")
	assert.Equal(t, "/api/agents/sessions/"+s.ID.String(), resp.Header.Get("Location"))
	assert.Equal(t, "Queued", s.Status)
	assert.Equal(t, alice.id, s.OwnerID)
	assert.Equal(t, commands.DefaultModelID, s.ModelID)
	assert.Equal(t, 10.0, s.Budget.HardCapUsd)
	assert.Equal(t, 80, s.Budget.WarnAtPercent)
	assert.Equal(t, "None", s.ToolApproval.Mode)
	assert.Equal(t, s.ID, st.session(t, alice, s.ID).ID)

	t.Run("with every option", func(t *testing.T) {
		skill := st.skill(t, alice, "retries")
		s, _ := st.start(t, alice, map[string]any{
			"name": "Retries", "modelId": "claude-opus-4", "skillIds": []string{skill.String()}, "warnAtPercent": 50,
			"autoContinue": map[string]any{"isEnabled": true, "validationCriteria": []map[string]any{{"type": "TestsPassing"}}},
			"toolApproval": map[string]any{"mode": "List", "tools": []string{"Bash"}, "timeoutSeconds": 30, "onTimeout": "Allow"},
		})
		assert.Equal(t, "Retries", s.Name)
		assert.Equal(t, "claude-opus-4", s.ModelID)
		assert.Equal(t, []uuid.UUID{skill}, s.EnabledSkillIDs)
		assert.Equal(t, 50, s.Budget.WarnAtPercent)
		require.NotNil(t, s.AutoContinue)
		assert.Equal(t, domain.DefaultMaxContinuations, s.AutoContinue.MaxContinuations)
		assert.Equal(t, ToolApproval{Mode: "List", Tools: []string{"Bash"}, TimeoutSeconds: 30, OnTimeout: "Allow"}, s.ToolApproval)
	})

	t.Run("a repeat with the same Idempotency-Key returns the same session without its key", func(t *testing.T) {
		key := "Idempotency-Key: start-" + uuid.NewString()
		first := st.call(t, http.MethodPost, "/api/agents/sessions", startBody(), alice.auth, key)
		require.Equal(t, http.StatusCreated, first.Code, first.String())
		again := st.call(t, http.MethodPost, "/api/agents/sessions", startBody(), alice.auth, key)
		require.Equal(t, http.StatusCreated, again.Code, again.String())
		a, b := decode[StartSessionResponse](t, first), decode[StartSessionResponse](t, again)
		assert.Equal(t, a.Session.ID, b.Session.ID)
		assert.NotEmpty(t, a.APIKey)
		assert.Empty(t, b.APIKey, "the key is shown once and never stored in plain text")
		var n int
		require.NoError(t, st.db.QueryRow(context.Background(), "SELECT count(*) FROM sessions WHERE id = $1", a.Session.ID).Scan(&n))
		assert.Equal(t, 1, n)
		var stored int
		require.NoError(t, st.db.QueryRow(context.Background(),
			"SELECT count(*) FROM idempotency_keys WHERE body::text LIKE '%'||$1||'%'", a.APIKey).Scan(&stored))
		assert.Zero(t, stored, "the plaintext key is not kept with the idempotent responses")
	})

	invalid := []struct {
		name  string
		patch map[string]any
		field string
	}{
		{"objective too long", map[string]any{"objective": strings.Repeat("x", 2001)}, "body.objective"},
		{"objective empty", map[string]any{"objective": ""}, "body.objective"},
		{"working directory outside the workspace", map[string]any{"workingDirectory": "/etc"}, "body.workingDirectory"},
		{"working directory above the owner's", map[string]any{"workingDirectory": "../elsewhere"}, "body.workingDirectory"},
		{"no budget", map[string]any{"budgetCapUsd": nil}, "body.budgetCapUsd"},
		{"negative budget", map[string]any{"budgetCapUsd": -1}, "body.budgetCapUsd"},
		{"warning out of range", map[string]any{"warnAtPercent": 100}, "body.warnAtPercent"},
		{"unknown approval mode", map[string]any{"toolApproval": map[string]any{"mode": "Some"}}, "body.toolApproval.mode"},
		{"list mode without tools", map[string]any{"toolApproval": map[string]any{"mode": "List"}}, "body.toolApproval.tools"},
		{"skill id not a UUID", map[string]any{"skillIds": []string{"x"}}, "body.skillIds[0]"},
	}
	for _, tt := range invalid {
		t.Run("422 "+tt.name, func(t *testing.T) {
			body := startBody()
			for k, v := range tt.patch {
				if v == nil {
					delete(body, k)
					continue
				}
				body[k] = v
			}
			resp := st.call(t, http.MethodPost, "/api/agents/sessions", body, alice.auth)
			require.Equal(t, http.StatusUnprocessableEntity, resp.Code, resp.String())
			p := resp.problem(t)
			assert.Equal(t, "validation", p["kind"])
			assert.Equal(t, tt.field, p["errors"].([]any)[0].(map[string]any)["location"], resp.String())
			for domainField := range startFields {
				assert.NotContains(t, resp.String(), domainField, "the answer names the request's fields, not the domain's")
			}
		})
	}
	t.Run("404 for a skill that is not yours", func(t *testing.T) {
		resp := st.call(t, http.MethodPost, "/api/agents/sessions", map[string]any{"workingDirectory": "src", "objective": "x",
			"budgetCapUsd": 1, "skillIds": []string{uuid.NewString()}}, alice.auth)
		require.Equal(t, http.StatusNotFound, resp.Code, resp.String())
	})
	t.Run("malformed JSON", func(t *testing.T) {
		resp := st.call(t, http.MethodPost, "/api/agents/sessions", `{"objective":`, alice.auth)
		assert.Contains(t, []int{400, 422}, resp.Code, resp.String())
		assert.Equal(t, "validation", resp.problem(t)["kind"])
	})
	t.Run("401 without a token", func(t *testing.T) {
		resp := st.call(t, http.MethodPost, "/api/agents/sessions", startBody())
		require.Equal(t, http.StatusUnauthorized, resp.Code)
		assert.Equal(t, "unauthorized", resp.problem(t)["kind"])
	})
	t.Run("401 for a token whose subject is not a UUID", func(t *testing.T) {
		resp := st.call(t, http.MethodPost, "/api/agents/sessions", startBody(), bearerOf(t, "alice"))
		require.Equal(t, http.StatusUnauthorized, resp.Code)
		assert.Contains(t, resp.problem(t)["detail"], "UUID")
	})
}

func bearerOf(t testing.TB, sub string) string {
	tok, err := NewToken(testSecret, sub, time.Hour)
	require.NoError(t, err)
	return "Authorization: Bearer " + tok
}

func TestReadSessions(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{}, true)
	alice, bob := newUser(t), newUser(t)
	queued, _ := st.start(t, alice, map[string]any{"name": "queued"})
	running, _ := st.running(t, alice, map[string]any{"name": "running"})
	review := st.inReview(t, alice)
	st.internal(t, running.ID, command.UpdateTaskList, command.TaskListData{Tasks: []domain.SessionTask{
		{ID: "1", Subject: "Write tests", Status: domain.TaskCompleted}, {ID: "2", Subject: "Write code", Status: domain.TaskInProgress}}})
	st.internal(t, running.ID, command.RecordPlanCreated, command.PlanData{Content: "1. tests 2. code"})
	st.internal(t, running.ID, command.UpdateMetrics, command.MetricsData{ModelID: "claude-sonnet-4-5", CostUsd: domain.Dollars(2),
		Tokens:        domain.TokenUsage{InputTokens: 1000, OutputTokens: 500},
		ContextWindow: domain.ContextWindowSnapshot{InputTokens: 50000, ModelContextLimit: 200000, RecordedAt: time.Now()}})
	st.start(t, bob, nil)

	t.Run("detail", func(t *testing.T) {
		s := st.session(t, alice, running.ID)
		assert.Equal(t, "Running", s.Status)
		assert.Equal(t, 2.0, s.Metrics.TotalCostUsd)
		assert.Equal(t, 2.0, s.Budget.EstimatedCostUsd)
		assert.Equal(t, 8.0, s.Budget.RemainingUsd)
		require.NotNil(t, s.TaskList)
		assert.Equal(t, 1, s.TaskList.CompletedCount)
		require.NotNil(t, s.StartedAt)
		r := st.session(t, alice, review.ID)
		assert.True(t, r.HasPendingReview)
		require.NotNil(t, r.Output)
		assert.Equal(t, 3, r.Output.FilesChanged)
	})
	t.Run("list, newest first, with a total", func(t *testing.T) {
		resp := st.call(t, http.MethodGet, "/api/agents/sessions", nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		list := decode[SessionList](t, resp)
		assert.Equal(t, 3, list.Total)
		require.Len(t, list.Items, 3)
		assert.Equal(t, []uuid.UUID{review.ID, running.ID, queued.ID}, []uuid.UUID{list.Items[0].ID, list.Items[1].ID, list.Items[2].ID})
		assert.Equal(t, 2.0, list.Items[1].TotalCostUsd)
		assert.InDelta(t, 25.0, list.Items[1].ContextWindowUsagePercent, 1e-9)
	})
	t.Run("list by status and page", func(t *testing.T) {
		list := decode[SessionList](t, st.call(t, http.MethodGet, "/api/agents/sessions?status=Running", nil, alice.auth))
		require.Len(t, list.Items, 1)
		assert.Equal(t, running.ID, list.Items[0].ID)
		page := decode[SessionList](t, st.call(t, http.MethodGet, "/api/agents/sessions?page=2&pageSize=2", nil, alice.auth))
		assert.Equal(t, 3, page.Total)
		assert.Equal(t, 2, page.Page)
		require.Len(t, page.Items, 1)
		assert.Equal(t, queued.ID, page.Items[0].ID)
	})
	t.Run("history", func(t *testing.T) {
		resp := st.call(t, http.MethodGet, "/api/agents/sessions/history?from="+time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		h := decode[SessionHistory](t, resp)
		assert.Equal(t, 3, h.Total)
		assert.Equal(t, "InProgress", h.Items[0].Outcome)
		future := decode[SessionHistory](t, st.call(t, http.MethodGet, "/api/agents/sessions/history?from="+time.Now().Add(time.Hour).UTC().Format(time.RFC3339), nil, alice.auth))
		assert.Zero(t, future.Total)
		assert.Empty(t, future.Items)
	})
	t.Run("task list, plan and metrics", func(t *testing.T) {
		base := "/api/agents/sessions/" + running.ID.String()
		tl := decode[SessionTaskList](t, st.call(t, http.MethodGet, base+"/task-list", nil, alice.auth))
		require.NotNil(t, tl.TaskList)
		assert.Equal(t, "Write code", tl.TaskList.Tasks[1].Subject)
		plan := decode[SessionPlan](t, st.call(t, http.MethodGet, base+"/plan", nil, alice.auth))
		require.NotNil(t, plan.Plan)
		assert.Equal(t, "Draft", plan.Plan.Status)
		m := decode[SessionMetrics](t, st.call(t, http.MethodGet, base+"/metrics", nil, alice.auth))
		assert.Equal(t, 2.0, m.TotalCostUsd)
		assert.EqualValues(t, 1500, m.TotalTokens)
		assert.EqualValues(t, 1000, m.TokenUsageByModel["claude-sonnet-4-5"].InputTokens)
		require.NotNil(t, m.ContextWindow)
		assert.EqualValues(t, 200000, m.ContextWindow.ModelContextLimit)

		empty := "/api/agents/sessions/" + queued.ID.String()
		assert.JSONEq(t, `{"sessionId":"`+queued.ID.String()+`","taskList":null}`, st.call(t, http.MethodGet, empty+"/task-list", nil, alice.auth).String())
		assert.JSONEq(t, `{"sessionId":"`+queued.ID.String()+`","plan":null}`, st.call(t, http.MethodGet, empty+"/plan", nil, alice.auth).String())
	})
	t.Run("pool", func(t *testing.T) {
		resp := st.call(t, http.MethodGet, "/api/agents/pool", nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		assert.Equal(t, PoolUtilization{ActiveCount: 2, MaxCount: domain.DefaultMaxConcurrentSessions, AvailableSlots: 18, Percentage: 10},
			decode[PoolUtilization](t, resp))
		assert.Equal(t, 0, decode[PoolUtilization](t, st.call(t, http.MethodGet, "/api/agents/pool", nil, bob.auth)).ActiveCount)
		assert.Equal(t, http.StatusUnauthorized, st.call(t, http.MethodGet, "/api/agents/pool", nil).Code)
	})

	reads := []string{"", "/task-list", "/plan", "/metrics", "/messages/queue", "/permissions"}
	for _, suffix := range reads {
		t.Run("GET {id}"+suffix+" errors", func(t *testing.T) {
			own := "/api/agents/sessions/" + running.ID.String() + suffix
			require.Equal(t, http.StatusOK, st.call(t, http.MethodGet, own, nil, alice.auth).Code)
			for name, c := range map[string]struct {
				path, auth string
				code       int
			}{
				"unknown":          {"/api/agents/sessions/" + uuid.NewString() + suffix, alice.auth, 404},
				"another owner's":  {own, bob.auth, 404},
				"not a UUID":       {"/api/agents/sessions/nope" + suffix, alice.auth, 422},
				"without a token":  {own, "", 401},
				"with a bad token": {own, "Authorization: Bearer x.y.z", 401},
			} {
				resp := st.call(t, http.MethodGet, c.path, nil, c.auth)
				require.Equal(t, c.code, resp.Code, "%s: %s", name, resp.String())
				resp.problem(t)
			}
		})
	}
	t.Run("list errors", func(t *testing.T) {
		for path, code := range map[string]int{
			"/api/agents/sessions?status=Sleeping":                                           422,
			"/api/agents/sessions?page=0":                                                    422,
			"/api/agents/sessions?pageSize=101":                                              422,
			"/api/agents/sessions/history?from=yesterday":                                    422,
			"/api/agents/sessions/history?from=2026-03-02T00:00:00Z&to=2026-03-01T00:00:00Z": 422,
		} {
			resp := st.call(t, http.MethodGet, path, nil, alice.auth)
			require.Equal(t, code, resp.Code, "%s: %s", path, resp.String())
			assert.Equal(t, "validation", resp.problem(t)["kind"], path)
		}
		assert.Equal(t, 401, st.call(t, http.MethodGet, "/api/agents/sessions", nil).Code)
		assert.Equal(t, 401, st.call(t, http.MethodGet, "/api/agents/sessions/history", nil).Code)
	})
}

// TestOwnerIsolation: another user sees none of a user's sessions, by
// list, by id or by stream, and cannot command them.
func TestOwnerIsolation(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{}, true)
	alice, bob := newUser(t), newUser(t)
	s, _ := st.running(t, alice, nil)

	list := decode[SessionList](t, st.call(t, http.MethodGet, "/api/agents/sessions", nil, bob.auth))
	assert.Zero(t, list.Total)
	assert.Empty(t, list.Items)
	assert.Zero(t, decode[SessionHistory](t, st.call(t, http.MethodGet, "/api/agents/sessions/history", nil, bob.auth)).Total)

	base := "/api/agents/sessions/" + s.ID.String()
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, base}, {http.MethodGet, base + "/stream"}, {http.MethodGet, base + "/messages/queue"},
		{http.MethodPost, base + "/pause"}, {http.MethodPost, base + "/cancel"}, {http.MethodPost, base + "/budget"},
		{http.MethodPost, base + "/messages/queue"},
	} {
		var body any
		switch {
		case strings.HasSuffix(c.path, "/budget"):
			body = map[string]any{"hardCapUsd": 50}
		case strings.HasSuffix(c.path, "/queue") && c.method == http.MethodPost:
			body = map[string]any{"content": "hi"}
		}
		resp := st.call(t, c.method, c.path, body, bob.auth)
		assert.Equal(t, http.StatusNotFound, resp.Code, "%s %s: %s", c.method, c.path, resp.String())
	}
	after := st.session(t, alice, s.ID)
	assert.Equal(t, "Running", after.Status, "bob changed nothing")
	assert.Equal(t, 10.0, after.Budget.HardCapUsd)
}
