package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// webhook creates a webhook of u through the API.
func (st *stack) webhook(t *testing.T, u user, body map[string]any) WebhookWithSecret {
	t.Helper()
	resp := st.call(t, http.MethodPost, "/api/agents/webhooks", body, u.auth)
	require.Equal(t, http.StatusCreated, resp.Code, resp.String())
	return decode[WebhookWithSecret](t, resp)
}

func TestWebhookLifecycle(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{}, false)
	alice := newUser(t)
	resp := st.call(t, http.MethodPost, "/api/agents/webhooks", map[string]any{"url": "https://hooks.example.com/in",
		"eventTypes": []string{"session_waiting_for_input", "agent_session_failed"}, "description": "chat"}, alice.auth)
	require.Equal(t, http.StatusCreated, resp.Code, resp.String())
	w := decode[WebhookWithSecret](t, resp)
	assert.Equal(t, "/api/agents/webhooks/"+w.ID.String(), resp.Header.Get("Location"))
	assert.True(t, strings.HasPrefix(w.Secret, "whsec_"), w.Secret)
	assert.True(t, w.Enabled)
	assert.Equal(t, []string{"session_waiting_for_input", "agent_session_failed"}, w.EventTypes)

	got := st.call(t, http.MethodGet, "/api/agents/webhooks/"+w.ID.String(), nil, alice.auth)
	require.Equal(t, http.StatusOK, got.Code, got.String())
	assert.NotContains(t, got.String(), w.Secret, "the secret is shown once")
	list := decode[WebhookList](t, st.call(t, http.MethodGet, "/api/agents/webhooks", nil, alice.auth))
	require.Len(t, list.Webhooks, 1)

	patched := st.call(t, http.MethodPatch, "/api/agents/webhooks/"+w.ID.String(),
		map[string]any{"enabled": false, "eventTypes": []string{}}, alice.auth)
	require.Equal(t, http.StatusOK, patched.Code, patched.String())
	p := decode[Webhook](t, patched)
	assert.False(t, p.Enabled)
	assert.Empty(t, p.EventTypes, "every event")
	requireConflict(t, st.call(t, http.MethodPost, "/api/agents/webhooks/"+w.ID.String()+"/test", nil, alice.auth), "disabled")

	rotated := st.call(t, http.MethodPost, "/api/agents/webhooks/"+w.ID.String()+"/rotate", map[string]any{"graceSeconds": 3600}, alice.auth)
	require.Equal(t, http.StatusOK, rotated.Code, rotated.String())
	r := decode[WebhookWithSecret](t, rotated)
	assert.NotEqual(t, w.Secret, r.Secret)
	assert.NotNil(t, r.PreviousSecretExpiresAt, "the old secret still signs for the grace")

	del := st.call(t, http.MethodDelete, "/api/agents/webhooks/"+w.ID.String(), nil, alice.auth)
	require.Equal(t, http.StatusNoContent, del.Code, del.String())
	requireNotFound(t, st.call(t, http.MethodGet, "/api/agents/webhooks/"+w.ID.String(), nil, alice.auth))
}

func TestAnotherOwnersWebhookIsNotFound(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{}, false)
	alice, bob := newUser(t), newUser(t)
	w := st.webhook(t, alice, map[string]any{"url": "https://hooks.example.com/in"})
	base := "/api/agents/webhooks/" + w.ID.String()
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, base}, {http.MethodPatch, base}, {http.MethodDelete, base}, {http.MethodPost, base + "/rotate"},
		{http.MethodGet, base + "/deliveries"}, {http.MethodPost, base + "/test"},
		{http.MethodPost, base + "/deliveries/" + uuid.NewString() + "/redeliver"},
	} {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			var body any
			if c.method == http.MethodPatch {
				body = map[string]any{"enabled": false}
			}
			requireNotFound(t, st.call(t, c.method, c.path, body, bob.auth))
		})
	}
	assert.Empty(t, decode[WebhookList](t, st.call(t, http.MethodGet, "/api/agents/webhooks", nil, bob.auth)).Webhooks)
}

func TestInvalidWebhooksAreRefused(t *testing.T) {
	t.Parallel()
	strict := newStack(t, Config{}, true)
	open := newStack(t, Config{WebhookAllowPrivate: true}, false)
	alice, bob := newUser(t), newUser(t)
	theirs, _ := strict.start(t, bob, nil)
	tests := []struct {
		name     string
		st       *stack
		body     map[string]any
		location string
		mention  string
	}{
		{"metadata", open, map[string]any{"url": "http://169.254.169.254/latest"}, "body.url", "cloud metadata"},
		{"link-local v4", open, map[string]any{"url": "http://169.254.3.4/in"}, "body.url", "link-local"},
		{"link-local v6", open, map[string]any{"url": "http://[fe80::1]/in"}, "body.url", "link-local"},
		{"loopback", strict, map[string]any{"url": "https://127.0.0.1:9000/in"}, "body.url", "AGENTBUS_WEBHOOK_ALLOW_PRIVATE"},
		{"private", strict, map[string]any{"url": "https://10.0.0.8/in"}, "body.url", "loopback or private"},
		{"localhost", strict, map[string]any{"url": "https://localhost/in"}, "body.url", "loopback or private"},
		{"http", strict, map[string]any{"url": "http://hooks.example.com/in"}, "body.url", "https"},
		{"not a URL", strict, map[string]any{"url": "hooks"}, "body.url", "https"},
		{"unknown event", strict, map[string]any{"url": "https://hooks.example.com/in", "eventTypes": []string{"session_exploded"}},
			"body.eventTypes", "not an event type of a session"},
		{"another's session", strict, map[string]any{"url": "https://hooks.example.com/in", "sessionId": theirs.ID}, "body.sessionId", "no session"},
		{"no template", strict, map[string]any{"url": "https://hooks.example.com/in", "templateId": uuid.NewString()}, "body.templateId", "no template"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := tt.st.call(t, http.MethodPost, "/api/agents/webhooks", tt.body, alice.auth)
			requireInvalid(t, resp, tt.location)
			assert.Contains(t, resp.String(), tt.mention)
		})
	}
	// The operator's setting allows loopback over http.
	w := open.webhook(t, alice, map[string]any{"url": "http://127.0.0.1:9000/in"})
	requireInvalid(t, open.call(t, http.MethodPatch, "/api/agents/webhooks/"+w.ID.String(),
		map[string]any{"url": "http://169.254.169.254/"}, alice.auth), "body.url")
}

func TestWebhookTestEventAndRedelivery(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{}, false)
	alice := newUser(t)
	w := st.webhook(t, alice, map[string]any{"url": "https://hooks.example.com/in"})
	base := "/api/agents/webhooks/" + w.ID.String()
	resp := st.call(t, http.MethodPost, base+"/test", nil, alice.auth)
	require.Equal(t, http.StatusAccepted, resp.Code, resp.String())
	d := decode[WebhookDelivery](t, resp)
	assert.Equal(t, "webhook_test", d.EventType)
	assert.Equal(t, "pending", d.Status)
	assert.NotNil(t, d.NextAttemptAt)

	log := decode[WebhookDeliveryList](t, st.call(t, http.MethodGet, base+"/deliveries", nil, alice.auth))
	require.Len(t, log.Deliveries, 1)
	assert.Equal(t, d.ID, log.Deliveries[0].ID)
	assert.Empty(t, decode[WebhookDeliveryList](t, st.call(t, http.MethodGet, base+"/deliveries?status=failed", nil, alice.auth)).Deliveries)
	requireConflict(t, st.call(t, http.MethodPost, base+"/deliveries/"+d.ID.String()+"/redeliver", nil, alice.auth), "pending")
	requireNotFound(t, st.call(t, http.MethodPost, base+"/deliveries/"+uuid.NewString()+"/redeliver", nil, alice.auth))
}
