package bus_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
)

// TestRunbook does each step of the runbook in nats/README.md through the
// JetStream API calls its nats CLI commands make.
func TestRunbook(t *testing.T) {
	t.Parallel()
	_, js, _ := bustest.Server(t)
	ctx := context.Background()
	msgs := publishEvents(t, js, "runbook", 6, 2) // sessions s0 and s1, three events each
	events, err := js.Stream(ctx, bus.StreamEvents)
	require.NoError(t, err)

	t.Run("inspect a session: nats stream subjects", func(t *testing.T) {
		info, err := events.Info(ctx, jetstream.WithSubjectFilter("agents.evt.session.s1.>"))
		require.NoError(t, err)
		assert.Equal(t, map[string]uint64{"agents.evt.session.s1.message_enqueued": 3}, info.State.Subjects)
	})

	t.Run("replay a session's subjects: nats sub --stream --all", func(t *testing.T) {
		c, err := js.OrderedConsumer(ctx, bus.StreamEvents, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{"agents.evt.session.s1.>"}, DeliverPolicy: jetstream.DeliverAllPolicy})
		require.NoError(t, err)
		batch, err := c.Fetch(10, jetstream.FetchMaxWait(time.Second))
		require.NoError(t, err)
		var got []string
		for m := range batch.Messages() {
			got = append(got, m.Headers().Get(nats.MsgIdHdr))
		}
		var want []string
		for _, m := range msgs {
			if m.Subject == "agents.evt.session.s1.message_enqueued" {
				want = append(want, m.Header.Get(nats.MsgIdHdr))
			}
		}
		assert.Equal(t, want, got, "every message of the session, in order")
	})

	t.Run("replay and drain a DLQ", func(t *testing.T) {
		var fixed atomic.Bool
		var mu sync.Mutex
		handled := map[string]bool{}
		start(t, js, runnerConfig(t, "runbook", func(_ context.Context, m jetstream.Msg) error {
			if m.Subject() == "agents.evt.session.s1.message_enqueued" && !fixed.Load() {
				return bus.Permanent(errors.New("cannot handle s1 yet"))
			}
			mu.Lock()
			handled[string(m.Data())] = true
			mu.Unlock()
			return nil
		}))
		dlq, err := js.Stream(ctx, bus.StreamDLQ)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			info, err := dlq.Info(ctx, jetstream.WithSubjectFilter("agents.dlq.runbook"))
			return err == nil && info.State.Subjects["agents.dlq.runbook"] == 3
		}, waitFor, 10*time.Millisecond, "s1's three events are dead-lettered")

		// nats stream get AGENTS_DLQ <seq> | nats pub --jetstream <Agents-Original-Subject>; nats stream rmm
		dead, err := dlq.GetLastMsgForSubject(ctx, "agents.dlq.runbook")
		require.NoError(t, err)
		fixed.Store(true)
		_, err = js.Publish(ctx, dead.Header.Get(bus.HeaderOriginalSubject), dead.Data)
		require.NoError(t, err)
		require.NoError(t, dlq.DeleteMsg(ctx, dead.Sequence))
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return handled[string(dead.Data)]
		}, waitFor, 10*time.Millisecond, "the replayed message is handled")

		// nats stream purge AGENTS_DLQ --subject agents.dlq.runbook -f
		require.NoError(t, dlq.Purge(ctx, jetstream.WithPurgeSubject("agents.dlq.runbook")))
		info, err := dlq.Info(ctx, jetstream.WithSubjectFilter("agents.dlq.runbook"))
		require.NoError(t, err)
		assert.Zero(t, info.State.Subjects["agents.dlq.runbook"], "drained")
	})

	t.Run("unpin a consumer: nats consumer unpin", func(t *testing.T) {
		c, err := js.CreateOrUpdateConsumer(ctx, bus.StreamEvents, jetstream.ConsumerConfig{
			Durable: "runbook-pinned", AckPolicy: jetstream.AckExplicitPolicy,
			PriorityGroups: []string{"ordered"}, PriorityPolicy: jetstream.PriorityPolicyPinned, PinnedTTL: time.Hour})
		require.NoError(t, err)
		batch, err := c.Fetch(1, jetstream.FetchMaxWait(time.Second), jetstream.FetchPriorityGroup("ordered"))
		require.NoError(t, err)
		for m := range batch.Messages() {
			require.NoError(t, m.Ack())
		}
		pinnedID := func() string {
			c, err := js.Consumer(ctx, bus.StreamEvents, "runbook-pinned")
			require.NoError(t, err)
			return c.CachedInfo().PriorityGroups[0].PinnedClientID
		}
		require.NotEmpty(t, pinnedID(), "the fetching client is pinned for an hour")
		require.NoError(t, events.UnpinConsumer(ctx, "runbook-pinned", "ordered"))
		assert.Empty(t, pinnedID(), "unpinned at once")
	})
}
