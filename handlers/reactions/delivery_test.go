package reactions_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/handlers/reactions"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// TestSteeringIsSentFromItsEvent: an Immediate message enqueued while the
// session runs reaches the sidecar from what its event carries, without
// reading the session or the queue back (neither is in this database);
// any other enqueued message makes the reaction read them.
func TestSteeringIsSentFromItsEvent(t *testing.T) {
	ctx := context.Background()
	pool := testenv.Postgres(t)
	_, js, _ := bustest.Server(t)
	d := reactions.Delivery{JS: js, DB: pool}
	session, owner := uuid.New(), uuid.New()

	enqueued := func(status domain.SessionStatus, priority domain.MessagePriority) (uuid.UUID, jetstream.Msg) {
		ev := domain.MessageEnqueuedEvent{QueueMeta: domain.QueueMeta{SessionID: session, OwnerID: owner, OccurredAt: time.Now().UTC()},
			MessageID: uuid.New(), Priority: priority, Source: domain.MessageFromUser, Content: "use make, not bazel", SessionStatus: status}
		data, err := json.Marshal(ev)
		require.NoError(t, err)
		subject := bus.EventSubject(domain.AggregateQueue, session.String(), ev.EventType())
		msg, err := bus.NewMsg(ctx, subject, bus.Envelope{ID: uuid.NewString(), Type: ev.EventType(), Aggregate: domain.AggregateQueue,
			AggregateID: session.String(), Version: 1, OwnerID: owner.String(), OccurredAt: ev.OccurredAt, Data: data})
		require.NoError(t, err)
		_, err = bus.PublishMsg(ctx, js, msg)
		require.NoError(t, err)
		cons, err := js.OrderedConsumer(ctx, bus.StreamEvents, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverLastPolicy})
		require.NoError(t, err)
		m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		require.NoError(t, err)
		return ev.MessageID, m
	}
	sent := func() []protocol.SteeringMessage {
		stream, err := js.Stream(ctx, bus.StreamSidecarCommands)
		require.NoError(t, err)
		info, err := stream.Info(ctx)
		require.NoError(t, err)
		var out []protocol.SteeringMessage
		for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
			m, err := stream.GetMsg(ctx, seq)
			require.NoError(t, err)
			env, err := bus.DecodeEnvelope(m.Data)
			require.NoError(t, err)
			var s protocol.SteeringMessage
			require.NoError(t, json.Unmarshal(env.Data, &s))
			out = append(out, s)
		}
		return out
	}

	id, m := enqueued(domain.StatusRunning, domain.PriorityImmediate)
	require.NoError(t, d.Handle(ctx, m))
	got := sent()
	require.Len(t, got, 1)
	assert.Equal(t, protocol.SteeringMessage{MessageID: id.String(), Content: "use make, not bazel", Priority: "Immediate"}, got[0])

	for _, c := range []struct {
		status   domain.SessionStatus
		priority domain.MessagePriority
	}{
		{domain.StatusRunning, domain.PriorityQueued},
		{domain.StatusWaitingForInput, domain.PriorityImmediate},
	} {
		_, m := enqueued(c.status, c.priority)
		assert.Error(t, d.Handle(ctx, m), "%s in %s: the reaction reads the session, which is not there", c.priority, c.status)
	}
	assert.Len(t, sent(), 1)
}
