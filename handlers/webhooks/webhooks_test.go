package webhooks_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/handlers/webhooks"
	"github.com/agentbus/agentbus/internal/webhooktest"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/postgres/queries"
)

var (
	waiting = domain.SessionWaitingForInputEvent{}
	failed  = domain.AgentSessionFailedEvent{}
	metrics = domain.SessionMetricsUpdatedEvent{}
)

func TestDeliversTheSubscribedEventsSignedAndInOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.run(t, quick(webhooks.Config{AllowPrivate: true, LinkBase: "https://bus.example"}))
	rcv := webhooktest.New(t, nil)
	_, secret := f.webhook(t, rcv.URL, waiting.EventType(), failed.EventType())
	s := f.session(t)
	want := []string{f.event(t, s, waiting)}
	f.event(t, s, metrics) // not subscribed
	want = append(want, f.event(t, s, waiting), f.event(t, s, failed))

	require.Eventually(t, func() bool { return len(rcv.AcceptedIDs()) >= len(want) }, wait, 10*time.Millisecond)
	assert.Equal(t, want, rcv.AcceptedIDs(), "exactly the subscribed events, in order")
	for _, g := range rcv.Requests() {
		require.NoError(t, g.Verify(secret), "the Standard Webhooks signature verifies")
		var p webhooks.Payload
		require.NoError(t, json.Unmarshal(g.Body, &p))
		assert.Equal(t, g.Header.Get(webhooks.HeaderID), p.Data.EventID)
		assert.Equal(t, s.String(), p.Data.SessionID)
		assert.Equal(t, "https://bus.example/api/agents/sessions/"+s.String(), p.Data.URL)
		assert.NotEmpty(t, p.Data.Status)
		assert.Contains(t, []string{waiting.EventType(), failed.EventType()}, p.Type)
	}
	assert.Error(t, rcv.Requests()[0].Verify("whsec_"+strings.Repeat("A", 43)+"="), "another secret does not verify")
}

func TestAReceiverDownForAWhileGetsEveryEventAfterRetries(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.run(t, quick(webhooks.Config{AllowPrivate: true}))
	// Down (503) for its first 12 requests, whichever they are, then up.
	rcv := webhooktest.New(t, func(n int) int {
		if n < 12 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	hook, _ := f.webhook(t, rcv.URL)
	a, b := f.session(t), f.session(t)
	var wantA, wantB []string
	for range 5 {
		wantA = append(wantA, f.event(t, a, waiting))
		wantB = append(wantB, f.event(t, b, waiting))
	}
	require.Eventually(t, func() bool { return len(rcv.AcceptedIDs()) == 10 }, wait, 10*time.Millisecond)
	assert.Greater(t, len(rcv.Requests()), 10, "some were retried")
	got := map[string][]string{}
	for _, g := range rcv.Requests() {
		if g.Status == http.StatusOK {
			var p webhooks.Payload
			require.NoError(t, json.Unmarshal(g.Body, &p))
			got[p.Data.SessionID] = append(got[p.Data.SessionID], p.Data.EventID)
		}
	}
	assert.Equal(t, wantA, got[a.String()], "each session's events arrive once, in order")
	assert.Equal(t, wantB, got[b.String()])

	// The worker records each outcome just after the receiver answered.
	store := queries.New(f.db, domain.SessionPool{})
	require.Eventually(t, func() bool {
		done, err := store.WebhookDeliveries(context.Background(), f.owner, hook, postgres.DeliveryDelivered, 100)
		return err == nil && len(done) == 10
	}, wait, 10*time.Millisecond)
	log, err := store.WebhookDeliveries(context.Background(), f.owner, hook, "", 100)
	require.NoError(t, err)
	require.Len(t, log, 10)
	for _, d := range log {
		assert.Equal(t, postgres.DeliveryDelivered, d.Status)
		require.NotNil(t, d.LastStatusCode)
		assert.Equal(t, http.StatusOK, *d.LastStatusCode)
	}
}

func TestAHangingReceiverDoesNotDelayAnotherEndpoint(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.run(t, quick(webhooks.Config{AllowPrivate: true, AttemptTimeout: 5 * time.Minute}))
	release := make(chan struct{})
	hanging := webhooktest.New(t, func(int) int { <-release; return http.StatusOK })
	t.Cleanup(func() { close(release) })
	healthy := webhooktest.New(t, nil)
	f.webhook(t, hanging.URL)
	f.webhook(t, healthy.URL)
	s, other := f.session(t), f.session(t)
	var want []string
	for range 3 {
		want = append(want, f.event(t, s, waiting), f.event(t, other, waiting))
	}
	require.Eventually(t, func() bool { return len(healthy.AcceptedIDs()) == len(want) }, wait, 10*time.Millisecond,
		"the healthy endpoint gets every event while the other hangs")
	assert.ElementsMatch(t, want, healthy.AcceptedIDs())
	assert.Empty(t, hanging.Requests(), "the hanging receiver has answered nothing yet")
}

func TestRotationSignsWithBothSecretsDuringTheGrace(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.run(t, quick(webhooks.Config{AllowPrivate: true}))
	rcv := webhooktest.New(t, nil)
	hook, old := f.webhook(t, rcv.URL)
	s := f.session(t)
	ctx := context.Background()

	rotated := domain.NewWebhookSecret(make([]byte, domain.WebhookSecretBytes))
	found, err := postgres.RotateWebhookSecret(ctx, f.db, f.owner, hook, rotated, time.Now().Add(time.Hour), time.Now())
	require.NoError(t, err)
	require.True(t, found)
	f.event(t, s, waiting)
	require.Eventually(t, func() bool { return len(rcv.AcceptedIDs()) == 1 }, wait, 10*time.Millisecond)
	g := rcv.Requests()[0]
	assert.Len(t, strings.Fields(g.Header.Get(webhooks.HeaderSignature)), 2, "two signatures, space-separated")
	assert.NoError(t, g.Verify(old), "the old secret verifies during the grace")
	assert.NoError(t, g.Verify(rotated), "the new one too")

	newest := domain.NewWebhookSecret([]byte(strings.Repeat("k", domain.WebhookSecretBytes)))
	_, err = postgres.RotateWebhookSecret(ctx, f.db, f.owner, hook, newest, time.Now().Add(-time.Second), time.Now())
	require.NoError(t, err)
	f.event(t, s, failed)
	require.Eventually(t, func() bool { return len(rcv.AcceptedIDs()) == 2 }, wait, 10*time.Millisecond)
	g = rcv.Requests()[1]
	assert.Len(t, strings.Fields(g.Header.Get(webhooks.HeaderSignature)), 1, "the grace is over")
	assert.NoError(t, g.Verify(newest))
	assert.Error(t, g.Verify(rotated), "the replaced secret no longer verifies")
}

func TestAPrivateDestinationIsRefusedAtDeliveryWithoutTheOperatorsSetting(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.run(t, quick(webhooks.Config{RetrySchedule: []time.Duration{time.Hour}}))
	rcv := webhooktest.New(t, nil)
	hook, _ := f.webhook(t, rcv.URL) // stored as it is: the check at creation is the API's
	f.event(t, f.session(t), waiting)
	store := queries.New(f.db, domain.SessionPool{})
	require.Eventually(t, func() bool {
		log, err := store.WebhookDeliveries(context.Background(), f.owner, hook, "", 10)
		return err == nil && len(log) == 1 && log[0].Attempts == 1 && log[0].LastError != nil
	}, wait, 10*time.Millisecond)
	log, err := store.WebhookDeliveries(context.Background(), f.owner, hook, "", 10)
	require.NoError(t, err)
	assert.Contains(t, *log[0].LastError, "destination refused")
	assert.Equal(t, postgres.DeliveryPending, log[0].Status, "retried later, per the schedule")
	assert.Empty(t, rcv.Requests(), "nothing reached the private address")
}

func TestDeliveriesThatFailInARowDisableTheirWebhook(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.run(t, quick(webhooks.Config{AllowPrivate: true, DisableAfter: 2,
		RetrySchedule: []time.Duration{10 * time.Millisecond}}))
	rcv := webhooktest.New(t, func(int) int { return http.StatusInternalServerError })
	hook, _ := f.webhook(t, rcv.URL)
	s := f.session(t)
	f.event(t, s, waiting)
	f.event(t, s, failed)
	store := queries.New(f.db, domain.SessionPool{})
	require.Eventually(t, func() bool {
		w, err := store.Webhook(context.Background(), f.owner, hook)
		return err == nil && !w.Enabled
	}, wait, 10*time.Millisecond)
	w, err := store.Webhook(context.Background(), f.owner, hook)
	require.NoError(t, err)
	require.NotNil(t, w.DisabledReason)
	assert.Contains(t, *w.DisabledReason, "2 deliveries in a row failed")
	assert.Equal(t, 2, w.ConsecutiveFailures)
	log, err := store.WebhookDeliveries(context.Background(), f.owner, hook, postgres.DeliveryFailed, 10)
	require.NoError(t, err)
	assert.Len(t, log, 2, "each failed after its attempt and its one retry")
	assert.Len(t, rcv.Requests(), 4)
}
