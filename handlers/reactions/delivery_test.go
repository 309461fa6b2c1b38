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
	"github.com/agentbus/agentbus/outbox"
	"github.com/agentbus/agentbus/postgres"
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

// TestSteeringGoesAlongWithItsEvent: the worker that commits a steering
// event sends the steering message with it; the delivery reaction, when
// the event reaches it, sends the same message again, which JetStream
// stores once. Any other event sends nothing along.
func TestSteeringGoesAlongWithItsEvent(t *testing.T) {
	ctx := context.Background()
	pool := testenv.Postgres(t)
	_, js, _ := bustest.Server(t)
	forwarder, err := outbox.New(postgres.NewOutbox(pool), js)
	require.NoError(t, err)
	forwarder.Along = reactions.SteeringAlong
	session, owner := uuid.New(), uuid.New()

	event := func(status domain.SessionStatus, priority domain.MessagePriority) (outbox.Message, domain.MessageEnqueuedEvent) {
		ev := domain.MessageEnqueuedEvent{QueueMeta: domain.QueueMeta{SessionID: session, OwnerID: owner, OccurredAt: time.Now().UTC()},
			MessageID: uuid.New(), Priority: priority, Source: domain.MessageFromUser, Content: "stop and run the tests", SessionStatus: status}
		data, err := json.Marshal(ev)
		require.NoError(t, err)
		id := uuid.New()
		env, err := json.Marshal(bus.Envelope{ID: id.String(), Type: ev.EventType(), Aggregate: domain.AggregateQueue,
			AggregateID: session.String(), Version: 1, OwnerID: owner.String(), OccurredAt: ev.OccurredAt, Data: data})
		require.NoError(t, err)
		return outbox.Message{ID: id, Subject: bus.EventSubject(domain.AggregateQueue, session.String(), ev.EventType()),
			Type: ev.EventType(), Payload: env}, ev
	}
	stored := func() []bus.Envelope {
		stream, err := js.Stream(ctx, bus.StreamSidecarCommands)
		require.NoError(t, err)
		info, err := stream.Info(ctx)
		require.NoError(t, err)
		var out []bus.Envelope
		for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
			m, err := stream.GetMsg(ctx, seq)
			require.NoError(t, err)
			env, err := bus.DecodeEnvelope(m.Data)
			require.NoError(t, err)
			out = append(out, env)
		}
		return out
	}

	steer, ev := event(domain.StatusRunning, domain.PriorityImmediate)
	require.NoError(t, forwarder.Forward(ctx, []outbox.Message{steer}))
	got := stored()
	require.Len(t, got, 1, "the steering message went out with its event")
	var s protocol.SteeringMessage
	require.NoError(t, json.Unmarshal(got[0].Data, &s))
	assert.Equal(t, protocol.SteeringMessage{MessageID: ev.MessageID.String(), Content: "stop and run the tests", Priority: "Immediate"}, s)
	assert.Equal(t, bus.SidecarCommandSubject(session.String(), protocol.CommandSteeringMessage),
		bus.SidecarCommandSubject(got[0].AggregateID, got[0].Type))

	// The event reaches the delivery reaction, which sends the message
	// again: the same id, so it is stored once.
	cons, err := js.OrderedConsumer(ctx, bus.StreamEvents, jetstream.OrderedConsumerConfig{FilterSubjects: []string{steer.Subject}})
	require.NoError(t, err)
	m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
	require.NoError(t, err)
	require.NoError(t, reactions.Delivery{JS: js, DB: pool}.Handle(ctx, m))
	assert.Len(t, stored(), 1, "the reaction's copy is a duplicate")

	for _, c := range []struct {
		status   domain.SessionStatus
		priority domain.MessagePriority
	}{
		{domain.StatusRunning, domain.PriorityQueued},
		{domain.StatusWaitingForInput, domain.PriorityImmediate},
		{domain.StatusIdle, domain.PriorityImmediate},
	} {
		other, _ := event(c.status, c.priority)
		require.NoError(t, forwarder.Forward(ctx, []outbox.Message{other}))
	}
	assert.Len(t, stored(), 1, "nothing goes along with other events")
}
