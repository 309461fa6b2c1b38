package api

import (
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSessionConfigIsComposedFromTemplateAndSkills(t *testing.T) {
	st := newStack(t, Config{}, true)
	bruno, other := newUser(t), newUser(t)
	body := templateBody("Shop")
	body["systemPrompt"] = "You maintain the shop."
	body["allowedTools"] = []string{"Read"}
	body["customToolDefinitions"] = []any{toolBody("search_orders")}
	template := st.template(t, bruno, body).ID
	skill := st.skill(t, bruno, "retry")
	s, _ := st.start(t, bruno, map[string]any{"templateId": template, "skillIds": []uuid.UUID{skill}})

	resp := st.call(t, http.MethodGet, "/api/agents/sessions/"+s.ID.String()+"/config", nil, bruno.auth)
	require.Equal(t, http.StatusOK, resp.Code, resp.String())
	cfg := decode[SessionConfig](t, resp)
	assert.Equal(t, "You maintain the shop.\n\nUse exponential backoff.", cfg.SystemPrompt)
	assert.Equal(t, []string{"Read", "search_orders"}, cfg.AllowedTools)
	require.Len(t, cfg.MCPTools, 1)
	assert.Equal(t, "search_orders", cfg.MCPTools[0].Name)
	assert.Equal(t, "claude-sonnet-4-5", cfg.ModelID)
	assert.Empty(t, cfg.SubAgents)
	assert.NotContains(t, resp.String(), "apiKey", "no keys")

	resp = st.call(t, http.MethodGet, "/api/agents/sessions/"+s.ID.String()+"/config", nil, other.auth)
	assert.Equal(t, http.StatusNotFound, resp.Code, "another owner's session does not exist for them")
	resp = st.call(t, http.MethodGet, "/api/agents/sessions/"+uuid.NewString()+"/config", nil, bruno.auth)
	assert.Equal(t, http.StatusNotFound, resp.Code)
}
