package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
)

// fieldOf is the location of the first error of a 422 answer.
func fieldOf(t *testing.T, r response) string {
	t.Helper()
	require.Equal(t, http.StatusUnprocessableEntity, r.Code, r.String())
	return r.problem(t)["errors"].([]any)[0].(map[string]any)["location"].(string)
}

// agentAuthCases checks that a path refuses a request without an agent
// key, with an unknown one and with a person's token.
func agentAuthCases(t *testing.T, st *stack, u user, path string, body any) {
	t.Run("401 without a valid agent key", func(t *testing.T) {
		for name, header := range map[string]string{"no key": "", "unknown key": agentAuth("abk_nope"), "a person's token": u.auth} {
			resp := st.call(t, http.MethodPost, path, body, header)
			require.Equal(t, http.StatusUnauthorized, resp.Code, "%s: %s", name, resp.String())
			assert.Equal(t, "unauthorized", resp.problem(t)["kind"], name)
		}
	})
}

func TestAgentCreatesATask(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{}, true)
	alice := newUser(t)
	s, key := st.running(t, alice, nil)
	other, otherKey := st.running(t, alice, nil)
	const path = "/api/agent/tasks"
	linked := uuid.New()
	body := map[string]any{"title": " Add retries to the webhook client ", "description": "It gives up on the first 503.",
		"priority": "High", "tags": []string{"http", "follow-up", "http"}, "linkedTaskId": linked}

	resp := st.call(t, http.MethodPost, path, body, agentAuth(key), "Idempotency-Key: task-1")
	require.Equal(t, http.StatusCreated, resp.Code, resp.String())
	task := decode[AgentTask](t, resp)
	assert.NotEqual(t, uuid.Nil, task.ID)
	assert.Equal(t, AgentTask{ID: task.ID, SessionID: s.ID, Title: "Add retries to the webhook client", Description: "It gives up on the first 503.",
		Priority: "High", Tags: []string{"http", "follow-up"}, LinkedTaskID: &linked}, task)

	again := st.call(t, http.MethodPost, path, body, agentAuth(key), "Idempotency-Key: task-1")
	require.Equal(t, http.StatusCreated, again.Code, again.String())
	assert.Equal(t, task, decode[AgentTask](t, again), "a repeat returns the same task")

	var payloads [][]byte
	rows, err := st.db.Query(context.Background(), "SELECT payload FROM outbox WHERE aggregate_id = $1 AND type = 'agent_api_task_created'", s.ID)
	require.NoError(t, err)
	for rows.Next() {
		var p []byte
		require.NoError(t, rows.Scan(&p))
		payloads = append(payloads, p)
	}
	require.NoError(t, rows.Err())
	require.Len(t, payloads, 1, "the session raised one event for the task")
	var env struct {
		Data domain.AgentAPITaskCreatedEvent
	}
	require.NoError(t, json.Unmarshal(payloads[0], &env))
	assert.Equal(t, task.ID, env.Data.CreatedTaskID)
	assert.Equal(t, &linked, env.Data.LinkedTaskID)
	assert.Equal(t, "AgentApi", env.Data.Source)
	assert.Equal(t, alice.id, env.Data.OwnerID)

	t.Run("the task is linked to the key's session", func(t *testing.T) {
		resp := st.call(t, http.MethodPost, path, map[string]any{"title": "Tidy the logs"}, agentAuth(otherKey))
		require.Equal(t, http.StatusCreated, resp.Code, resp.String())
		got := decode[AgentTask](t, resp)
		assert.Equal(t, other.ID, got.SessionID)
		assert.Equal(t, "Medium", got.Priority, "the default priority")
	})
	t.Run("422 for an invalid task", func(t *testing.T) {
		for want, body := range map[string]map[string]any{
			"body.title":       {"title": "  "},
			"body.priority":    {"title": "x", "priority": "Someday"},
			"body.tags":        {"title": "x", "tags": strings.Split("a b c d e f g h i j k", " ")},
			"body.tags[1]":     {"title": "x", "tags": []string{"ok", " "}},
			"body.description": {"title": "x", "description": strings.Repeat("x", 4001)},
		} {
			assert.Equal(t, want, fieldOf(t, st.call(t, http.MethodPost, path, body, agentAuth(otherKey))))
		}
		assert.Equal(t, http.StatusUnprocessableEntity, st.call(t, http.MethodPost, path, map[string]any{}, agentAuth(otherKey)).Code)
		assert.Equal(t, http.StatusUnprocessableEntity,
			st.call(t, http.MethodPost, path, map[string]any{"title": "x", "linkedTaskId": "nope"}, agentAuth(otherKey)).Code)
	})
	agentAuthCases(t, st, alice, path, body)
	t.Run("409 unless the session is running", func(t *testing.T) {
		queued, queuedKey := st.start(t, alice, nil)
		resp := st.call(t, http.MethodPost, path, body, agentAuth(queuedKey))
		require.Equal(t, http.StatusConflict, resp.Code, resp.String())
		assert.Equal(t, "Queued", resp.problem(t)["currentStatus"])
		assert.Equal(t, "Queued", st.session(t, alice, queued.ID).Status)
	})
}

func TestAgentHandsOff(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{}, true)
	alice := newUser(t)
	s, key := st.running(t, alice, nil)
	other, otherKey := st.running(t, alice, nil)
	path := func(id uuid.UUID) string { return "/api/agent/sessions/" + id.String() + "/handoff" }
	body := map[string]any{"reason": "Context polluted by failed approaches", "summary": "Tried two fixes for the flaky TestCache.",
		"remainingWork": "Find the race in service/cache.go.", "keyDecisions": "Not a mutex per key: it deadlocks."}

	resp := st.call(t, http.MethodPost, path(s.ID), body, agentAuth(key))
	require.Equal(t, http.StatusOK, resp.Code, resp.String())
	h := decode[AgentHandoff](t, resp)
	assert.Equal(t, "ContextExhausted", h.Session.Status)
	require.NotNil(t, h.Session.ChainID, "the session's chain is created")
	assert.Equal(t, h.Session, st.session(t, alice, s.ID), "the answer is the new state")

	c, err := postgres.Chains{}.Get(context.Background(), st.db, *h.Session.ChainID)
	require.NoError(t, err)
	doc, pending := c.PendingHandoff()
	require.True(t, pending, "the document waits for the continuation session")
	assert.Equal(t, h.HandoffDocumentID, doc.ID)
	assert.Equal(t, s.ID, doc.FromSessionID)
	assert.Equal(t, []string{body["summary"].(string), body["remainingWork"].(string), body["keyDecisions"].(string)},
		[]string{doc.Summary, doc.RemainingWork, doc.KeyDecisions})

	t.Run("an agent key hands off its own session only", func(t *testing.T) {
		resp := st.call(t, http.MethodPost, path(other.ID), body, agentAuth(key))
		require.Equal(t, http.StatusForbidden, resp.Code, resp.String())
		assert.Equal(t, "forbidden", resp.problem(t)["kind"])
		assert.Equal(t, "Running", st.session(t, alice, other.ID).Status)
	})
	t.Run("422 for an invalid document", func(t *testing.T) {
		with := func(field string, v any) map[string]any {
			b := map[string]any{}
			for k, x := range body {
				b[k] = x
			}
			if v == nil {
				delete(b, field)
			} else {
				b[field] = v
			}
			return b
		}
		for want, b := range map[string]map[string]any{
			"body.reason":       with("reason", "  "),
			"body.summary":      with("summary", " "),
			"body.keyDecisions": with("keyDecisions", strings.Repeat("x", 4001)),
			"body":              with("remainingWork", nil), // a missing field is the body's error
		} {
			assert.Equal(t, want, fieldOf(t, st.call(t, http.MethodPost, path(other.ID), b, agentAuth(otherKey))))
		}
		assert.Equal(t, "Running", st.session(t, alice, other.ID).Status, "a refused handoff leaves the session running")
	})
	agentAuthCases(t, st, alice, path(other.ID), body)
	t.Run("409 unless the session is running", func(t *testing.T) {
		resp := st.call(t, http.MethodPost, path(s.ID), body, agentAuth(key))
		require.Equal(t, http.StatusConflict, resp.Code, resp.String())
		assert.Equal(t, "ContextExhausted", resp.problem(t)["currentStatus"])

		queued, queuedKey := st.start(t, alice, nil)
		resp = st.call(t, http.MethodPost, path(queued.ID), body, agentAuth(queuedKey))
		require.Equal(t, http.StatusConflict, resp.Code, resp.String())
		assert.Equal(t, "Queued", resp.problem(t)["currentStatus"])
	})
}

func TestAgentRecordsAMemoryPill(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{}, true)
	alice := newUser(t)
	skill, otherSkill := st.skill(t, alice, "retries"), st.skill(t, alice, "logging")
	s, key := st.running(t, alice, map[string]any{"skillIds": []string{skill.String()}})
	other, otherKey := st.running(t, alice, map[string]any{"skillIds": []string{otherSkill.String()}})
	path := func(id uuid.UUID) string { return "/api/agent/skills/" + id.String() + "/memory-pills" }
	body := map[string]any{"content": " Retry only idempotent requests. ", "category": "Guideline"}

	resp := st.call(t, http.MethodPost, path(skill), body, agentAuth(key), "Idempotency-Key: pill-1")
	require.Equal(t, http.StatusCreated, resp.Code, resp.String())
	pill := decode[AgentMemoryPill](t, resp)
	assert.NotEqual(t, uuid.Nil, pill.ID)
	assert.Equal(t, AgentMemoryPill{ID: pill.ID, SkillID: skill, SessionID: s.ID, Content: "Retry only idempotent requests.",
		Category: "Guideline", Status: "Active", CreatedAt: pill.CreatedAt}, pill)
	again := st.call(t, http.MethodPost, path(skill), body, agentAuth(key), "Idempotency-Key: pill-1")
	require.Equal(t, http.StatusCreated, again.Code, again.String())
	assert.Equal(t, pill.ID, decode[AgentMemoryPill](t, again).ID, "a repeat returns the same pill")

	pills := func() []domain.MemoryPill {
		sk, err := postgres.Skills{}.Get(context.Background(), st.db, skill)
		require.NoError(t, err)
		return sk.MemoryPills()
	}
	require.Len(t, pills(), 1)
	assert.Equal(t, pill.ID, pills()[0].ID)

	t.Run("403 on a skill not enabled on the agent's session", func(t *testing.T) {
		for name, id := range map[string]uuid.UUID{"another session's skill": otherSkill, "unknown skill": uuid.New()} {
			resp := st.call(t, http.MethodPost, path(id), body, agentAuth(key))
			require.Equal(t, http.StatusForbidden, resp.Code, "%s: %s", name, resp.String())
			assert.Equal(t, "forbidden", resp.problem(t)["kind"], name)
		}
		resp := st.call(t, http.MethodPost, path(skill), body, agentAuth(otherKey))
		require.Equal(t, http.StatusForbidden, resp.Code, "the key of a session without the skill: %s", resp.String())
		assert.Len(t, pills(), 1, "refusals record nothing")
	})
	t.Run("422 for an invalid pill", func(t *testing.T) {
		for want, b := range map[string]map[string]any{
			"body.content":  {"content": "  ", "category": "Tip"},
			"body.category": {"content": "x", "category": "Rumour"},
		} {
			assert.Equal(t, want, fieldOf(t, st.call(t, http.MethodPost, path(skill), b, agentAuth(key))))
		}
		assert.Equal(t, http.StatusUnprocessableEntity,
			st.call(t, http.MethodPost, path(skill), map[string]any{"content": strings.Repeat("x", 2001), "category": "Tip"}, agentAuth(key)).Code)
		assert.Equal(t, http.StatusUnprocessableEntity, st.call(t, http.MethodPost, "/api/agent/skills/nope/memory-pills", body, agentAuth(key)).Code)
	})
	agentAuthCases(t, st, alice, path(skill), body)
	t.Run("409 unless the session is running", func(t *testing.T) {
		st.internal(t, other.ID, command.RecordTurnCompleted, nil)
		resp := st.call(t, http.MethodPost, path(otherSkill), body, agentAuth(otherKey))
		require.Equal(t, http.StatusConflict, resp.Code, resp.String())
		assert.Equal(t, "Idle", resp.problem(t)["currentStatus"])
	})
}
