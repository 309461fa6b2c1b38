package main

import (
	"context"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/api"
	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/internal/webhooktest"
)

// subscribed are the event types of the end-to-end test's webhook: a
// question, output to review, approval and failure.
var subscribed = []string{
	domain.SessionWaitingForInputEvent{}.EventType(),
	domain.AgentSessionOutputReadyEvent{}.EventType(),
	domain.AgentSessionApprovedEvent{}.EventType(),
	domain.AgentSessionFailedEvent{}.EventType(),
}

// quickWebhooks makes the webhooks worker of an up started next retry
// within milliseconds and post to the tests' loopback receivers.
func quickWebhooks(t *testing.T) {
	t.Setenv("AGENTBUS_WEBHOOK_ALLOW_PRIVATE", "1")
	t.Setenv("AGENTBUS_WEBHOOK_RETRY_SCHEDULE", "20ms,40ms,80ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms")
	t.Setenv("AGENTBUS_WEBHOOK_POLL", "50ms")
	t.Setenv("AGENTBUS_WEBHOOK_TIMEOUT", "5m")
}

// sessionEvents returns the ids of the session's events of the given
// types, in the order AGENTS_EVENTS holds them.
func sessionEvents(t *testing.T, js jetstream.JetStream, session string, types []string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c, err := js.OrderedConsumer(ctx, bus.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{bus.EventSubject(domain.AggregateSession, session, "*")}})
	require.NoError(t, err)
	info, err := c.Info(ctx)
	require.NoError(t, err)
	var ids []string
	for n := info.NumPending; n > 0; n-- {
		m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
		require.NoError(t, err)
		env, err := bus.DecodeEnvelope(m.Data())
		require.NoError(t, err)
		if slices.Contains(types, env.Type) {
			ids = append(ids, env.ID)
		}
	}
	return ids
}

// TestWebhooksDeliverASessionsEventsThroughUp runs a session through a
// question, its answer, review and approval in up, with three endpoints:
// one that is down for its first requests, one that hangs, and the
// operator's setting for loopback receivers.
func TestWebhooksDeliverASessionsEventsThroughUp(t *testing.T) {
	quickWebhooks(t)
	u := startUpWithRuntime(t)

	// Down (503) for its first three requests, then up.
	flaky := webhooktest.New(t, func(n int) int {
		if n < 3 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	release := make(chan struct{})
	hanging := webhooktest.New(t, func(int) int { <-release; return http.StatusOK })
	t.Cleanup(func() { close(release) })
	var hook api.WebhookWithSecret
	u.Must(http.MethodPost, "/api/agents/webhooks", map[string]any{"url": flaky.URL + "/in", "eventTypes": subscribed}, &hook)
	u.Must(http.MethodPost, "/api/agents/webhooks", map[string]any{"url": hanging.URL + "/in"}, nil)

	id := u.start(map[string]any{"workingDirectory": "webhooks", "objective": "Pick a database [scenario:question]"})
	u.waitStatus(id, "WaitingForInput")
	u.Must(http.MethodPost, "/api/agents/sessions/"+id+"/answer", map[string]any{"answer": "PostgreSQL"}, nil)
	u.waitReview(id)
	u.Must(http.MethodPost, "/api/agents/sessions/"+id+"/approve", nil, nil)
	u.waitStatus(id, "Completed")

	js := u.jetStream()
	want := sessionEvents(t, js, id, subscribed)
	require.GreaterOrEqual(t, len(want), 3, "a question, output to review and the approval")
	require.Eventually(t, func() bool { return len(flaky.Accepted()) >= len(want) }, 2*wait, 20*time.Millisecond,
		"every subscribed event reaches the receiver after its retries, while the other endpoint hangs")
	assert.Equal(t, want, flaky.AcceptedIDs(), "exactly the subscribed events, each once, in order")
	assert.Greater(t, len(flaky.Requests()), len(want), "the receiver was down: some were retried")
	var types []string
	for _, g := range flaky.Accepted() {
		require.NoError(t, g.Verify(hook.Secret), "signed with the webhook's secret, as Standard Webhooks verifies")
		p := g.Payload(t)
		assert.Equal(t, id, p.Data.SessionID)
		assert.True(t, strings.HasSuffix(p.Data.URL, "/api/agents/sessions/"+id), p.Data.URL)
		types = append(types, p.Type)
	}
	assert.Equal(t, domain.SessionWaitingForInputEvent{}.EventType(), types[0])
	assert.Equal(t, domain.AgentSessionApprovedEvent{}.EventType(), types[len(types)-1])
	assert.Empty(t, hanging.Requests(), "the hanging receiver has answered nothing")

	// The delivery log, and a redelivery of the approval with its id.
	// The worker records an outcome just after the receiver answered.
	var log api.WebhookDeliveryList
	require.Eventually(t, func() bool {
		u.Must(http.MethodGet, "/api/agents/webhooks/"+hook.ID.String()+"/deliveries", nil, &log)
		return len(log.Deliveries) == len(want) && !slices.ContainsFunc(log.Deliveries,
			func(d api.WebhookDelivery) bool { return d.Status != "delivered" })
	}, wait, 20*time.Millisecond, "every delivery recorded as delivered")
	approval := log.Deliveries[0]
	assert.Equal(t, domain.AgentSessionApprovedEvent{}.EventType(), approval.EventType, "newest first")
	assert.Equal(t, "delivered", approval.Status)
	require.NotNil(t, approval.StatusCode)
	assert.Equal(t, http.StatusOK, *approval.StatusCode)
	assert.NotNil(t, approval.LatencyMs)
	assert.Equal(t, "ok from the receiver", approval.ResponseExcerpt)
	before := len(flaky.Requests())
	require.Equal(t, http.StatusAccepted, u.Call(http.MethodPost,
		"/api/agents/webhooks/"+hook.ID.String()+"/deliveries/"+approval.ID.String()+"/redeliver", nil, nil))
	require.Eventually(t, func() bool { return len(flaky.Requests()) > before }, wait, 20*time.Millisecond)
	again := flaky.Requests()[before]
	assert.Equal(t, approval.EventID, again.ID(), "a redelivery carries the event's id")
	assert.NoError(t, again.Verify(hook.Secret))

	// Rotation: both secrets verify during the grace, on a test event.
	var rotated api.WebhookWithSecret
	u.Must(http.MethodPost, "/api/agents/webhooks/"+hook.ID.String()+"/rotate", map[string]any{"graceSeconds": 3600}, &rotated)
	before = len(flaky.Requests())
	var test api.WebhookDelivery
	require.Equal(t, http.StatusAccepted, u.Call(http.MethodPost, "/api/agents/webhooks/"+hook.ID.String()+"/test", nil, &test))
	require.Eventually(t, func() bool { return len(flaky.Requests()) > before }, wait, 20*time.Millisecond)
	g := flaky.Requests()[before]
	assert.Equal(t, domain.WebhookTestEventType, g.Payload(t).Type)
	assert.NoError(t, g.Verify(hook.Secret), "the replaced secret during the grace")
	assert.NoError(t, g.Verify(rotated.Secret), "the new secret")
}

// allSessionEvents is every event type a webhook may subscribe to.
func allSessionEvents() []string { return domain.WebhookEventTypes() }

// TestWebhooksCLI runs each `agentbus webhooks` subcommand against up.
func TestWebhooksCLI(t *testing.T) {
	quickWebhooks(t)
	bin := buildAgentbus(t)
	u := startUpWithRuntime(t)
	c := &cliUnderTest{t: t, bin: bin, api: u.base, token: u.token}
	rcv := webhooktest.New(t, nil)

	created := c.must("webhooks", "create", rcv.URL, "--event", domain.AgentSessionFailedEvent{}.EventType(), "--description", "alerts")
	require.Regexp(t, `(?m)^ID\s+[0-9a-f-]{36}\n`, created)
	require.Regexp(t, `(?m)^Secret\s+whsec_`, created)
	id := strings.Fields(strings.Split(created, "\n")[0])[1]
	secret := strings.Fields(strings.Split(created, "\n")[1])[1]
	assert.Regexp(t, `(?m)^`+id+`\s+`+regexp.QuoteMeta(rcv.URL)+`\s+agent_session_failed\s+yes\s+0\s`, c.must("webhooks", "ls"))
	assert.Contains(t, c.must("webhooks", "show", id), "agent_session_failed")

	test := strings.Fields(c.must("webhooks", "test", id))
	require.Len(t, test, 2)
	assert.Equal(t, "pending", test[1])
	require.Eventually(t, func() bool { return len(rcv.Accepted()) == 1 }, wait, 20*time.Millisecond)
	assert.NoError(t, rcv.Accepted()[0].Verify(secret))
	require.Eventually(t, func() bool {
		return regexp.MustCompile(`(?m)^` + test[0] + `\s+webhook_test\s+delivered\s+1\s+200\s`).MatchString(c.must("webhooks", "deliveries", id))
	}, wait, 50*time.Millisecond, "the delivery log shows the test event delivered")
	assert.Contains(t, c.must("webhooks", "redeliver", id, test[0]), test[0]+" pending")
	require.Eventually(t, func() bool { return len(rcv.Requests()) == 2 }, wait, 20*time.Millisecond)

	rotated := c.must("webhooks", "rotate", id, "--grace", "1h")
	assert.Regexp(t, `(?m)^Old secret until\s`, rotated)
	assert.Regexp(t, `(?m)^Secret\s+whsec_`, rotated)
	assert.Regexp(t, `(?m)^Enabled\s+no$`, c.must("webhooks", "disable", id))
	c.fails(4, "disabled", "webhooks", "test", id)
	c.fails(5, "cloud metadata", "webhooks", "create", "http://169.254.169.254/latest")
	c.fails(2, "want 2 arguments", "webhooks", "redeliver", id)
	assert.Contains(t, c.must("webhooks", "rm", id), id+" deleted")
	c.fails(3, "not found", "webhooks", "show", id)
}
