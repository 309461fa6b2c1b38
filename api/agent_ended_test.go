package api

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/command"
)

// TestEndedSessionsAgentKeyLogsNothing: once a session is Cancelled no
// agent runs for it, and its key is refused by the log as by every other
// agent endpoint: 409 with the session's status, nothing appended.
func TestEndedSessionsAgentKeyLogsNothing(t *testing.T) {
	st := newStack(t, Config{}, true)
	u := newUser(t)
	s, key := st.running(t, u, nil)
	path := "/api/agent/sessions/" + s.ID.String()
	resp := st.call(t, http.MethodPost, path+"/log", map[string]any{"content": "Kept the layout"}, agentAuth(key))
	require.Equal(t, http.StatusCreated, resp.Code, "a running agent logs: %s", resp)

	cancelling := st.internal(t, s.ID, command.CancelSession, nil)
	require.Len(t, cancelling.AwaitedAcks, 1)
	st.internal(t, s.ID, command.ConfirmCancelled, command.AckData{CommandID: cancelling.AwaitedAcks[0].CommandID})
	require.Equal(t, "Cancelled", string(st.session(t, u, s.ID).Status))

	for _, c := range []struct{ path, body string }{
		{path + "/log", `{"content":"Still here"}`},
		{path + "/output", `{"outputLineCount":1,"filesChanged":1,"testsAdded":0,"allTestsPassing":true}`},
		{path + "/handoff", `{"reason":"r","summary":"s","remainingWork":"w"}`},
	} {
		resp := st.call(t, http.MethodPost, c.path, c.body, agentAuth(key))
		require.Equal(t, http.StatusConflict, resp.Code, "%s: %s", c.path, resp)
		assert.Equal(t, "Cancelled", resp.problem(t)["currentStatus"], c.path)
	}
	logs := st.call(t, http.MethodGet, "/api/agents/sessions/"+s.ID.String()+"/logs", nil, u.auth)
	require.Equal(t, http.StatusOK, logs.Code, logs.String())
	assert.NotContains(t, logs.String(), "Still here")
}
