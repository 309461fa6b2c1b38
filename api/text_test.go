package api

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTextPostgresCannotStoreIsRefusedWithTheField: a NUL character or
// bytes that are not UTF-8 in any string of a request are a 422 that names
// the field, answered before any command is sent — never a command the
// database refuses and the worker retries.
func TestTextPostgresCannotStoreIsRefusedWithTheField(t *testing.T) {
	st := newStack(t, Config{}, true)
	u := newUser(t)
	running, key := st.running(t, u, nil)
	id := running.ID.String()

	tests := []struct {
		name, method, path, body string
		auth                     string
		field                    string
	}{
		{"start: NUL in the objective", http.MethodPost, "/api/agents/sessions",
			`{"workingDirectory":"/tmp","objective":"Say\u0000hello","budgetCapUsd":5}`, u.auth, "body.objective"},
		{"start: invalid UTF-8 in the directory", http.MethodPost, "/api/agents/sessions",
			"{\"workingDirectory\":\"/tmp/caf\xe9\",\"objective\":\"Say hello\",\"budgetCapUsd\":5}", u.auth, "body.workingDirectory"},
		{"enqueue: NUL in the content", http.MethodPost, "/api/agents/sessions/" + id + "/messages/queue",
			`{"content":"Use\u0000 the standard library","priority":"Queued"}`, u.auth, "body.content"},
		{"skill: NUL in the name", http.MethodPost, "/api/agents/skills",
			`{"name":"HTTP\u0000","description":"Retries"}`, u.auth, "body.name"},
		{"template: NUL in an allowed tool", http.MethodPost, "/api/agents/templates",
			`{"name":"Backend","modelId":"claude-sonnet-4-5","allowedTools":["Read","Ed\u0000it"],"defaultBudgetCapUsd":10}`, u.auth, "body.allowedTools[1]"},
		{"template rule: NUL in the pattern", http.MethodPost, "/api/agents/templates/" + id + "/rules",
			`{"matchField":"subject","matchPattern":"(?i)in\u0000voice","classifyAs":"billing"}`, u.auth, "body.matchPattern"},
		{"agent log: NUL in the content", http.MethodPost, "/api/agent/sessions/" + id + "/log",
			`{"content":"Kept\u0000 the layout"}`, agentAuth(key), "body.content"},
		{"query: NUL in a parameter", http.MethodGet, "/api/agents/sessions?status=Run%00ning", "", u.auth, "query.status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body any
			if tt.body != "" {
				body = tt.body
			}
			resp := st.call(t, tt.method, tt.path, body, tt.auth, "Idempotency-Key: "+tt.name)
			require.Equal(t, http.StatusUnprocessableEntity, resp.Code, resp.String())
			p := resp.problem(t)
			assert.Equal(t, KindValidation, p["kind"])
			errs, ok := p["errors"].([]any)
			require.True(t, ok, resp.String())
			require.Len(t, errs, 1)
			assert.Equal(t, tt.field, errs[0].(map[string]any)["location"])
		})
	}

	// Nothing was sent: the worker holds no refusal of any of them.
	var n int
	require.NoError(t, st.db.QueryRow(context.Background(),
		`SELECT count(*) FROM processed_messages WHERE result->'error'->>'message' LIKE '%invalid byte sequence%'`).Scan(&n))
	assert.Zero(t, n)
}
