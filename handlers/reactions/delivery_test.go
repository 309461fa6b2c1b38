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
	"github.com/agentbus/agentbus/bus/outbox"
	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/handlers/reactions"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// TestSteeringIsSentFromItsEvent: an Immediate message enqueued while the
// session runs reaches the sidecar from what its event carries, without
// reading the session or the queue back (neither is in this database); a
// message the status in its event does not take is left without reading
// them either; any other enqueued message makes the reaction read them.
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
		{domain.StatusPaused, domain.PriorityQueued},
	} {
		_, m := enqueued(c.status, c.priority)
		assert.NoError(t, d.Handle(ctx, m), "%s in %s: left for later, nothing read", c.priority, c.status)
	}
	for _, c := range []struct {
		status   domain.SessionStatus
		priority domain.MessagePriority
	}{
		{domain.StatusIdle, domain.PriorityQueued},
		{domain.StatusInterrupted, domain.PriorityImmediate},
		{"", domain.PriorityQueued},
	} {
		_, m := enqueued(c.status, c.priority)
		assert.Error(t, d.Handle(ctx, m), "%s in %q: the reaction reads the session, which is not there", c.priority, c.status)
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

// TestAMessageEnqueuedAsTheTurnEndsIsDelivered: a Queued message whose
// enqueue read the session Running, while the turn ends before the enqueue
// commits, still reaches the sidecar once the session is Idle. The test's
// own transaction creates the session's queue first and keeps it
// uncommitted, so the enqueue waits in its insert, after it read the
// status; meanwhile the turn ends. Were the turn's end to commit then, the
// delivery reaction would handle it with a queue that does not hold the
// message yet, and the enqueue's event would claim Running: the message
// would wait for the next turn's end. The turn's end must wait for the
// enqueue instead (or the enqueue must see Idle).
func TestAMessageEnqueuedAsTheTurnEndsIsDelivered(t *testing.T) {
	ctx := context.Background()
	f := startFlow(t, 0)
	id := f.start(t)
	f.waitStatus(t, id, domain.StatusRunning)

	blocker, err := f.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = blocker.Rollback(ctx) }()
	_, err = blocker.Exec(ctx, `INSERT INTO message_queues (session_id, owner_id, version, doc)
VALUES ($1, $2, 1, '{"messages": [], "nextSequence": 0}')`, id, f.owner)
	require.NoError(t, err)

	msg := uuid.New()
	done := make(chan error, 1)
	go func() {
		cmd, err := command.New(domain.AggregateQueue, command.EnqueueMessage, id, f.owner.String(),
			command.EnqueueData{MessageID: msg, Content: "then update the docs", Priority: domain.PriorityQueued})
		if err == nil {
			var r command.Result
			if r, err = f.client.Do(ctx, cmd); err == nil {
				err = r.Err()
			}
		}
		done <- err
	}()
	require.Eventually(t, func() bool {
		var waiting int
		err := f.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO message_queues%' AND pid <> pg_backend_pid()`).Scan(&waiting)
		return err == nil && waiting == 1
	}, 30*time.Second, 10*time.Millisecond, "the enqueue waits for the test's queue")

	f.raw(t, id, "turn_completed", protocol.TurnCompleted{CostUSD: 0.1, TotalCostUSD: 0.1, DurationMS: 1000, NumTurns: 1})
	require.Eventually(t, func() bool {
		var waiting int
		err := f.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND query LIKE '%UPDATE sessions%' AND pid <> pg_backend_pid()`).Scan(&waiting)
		return (err == nil && waiting == 1) || f.status(t, id) == domain.StatusIdle
	}, 30*time.Second, 10*time.Millisecond, "the turn's end commits or waits for the enqueue")
	settled(t, f.js, reactions.DeliveryConsumer)
	require.NoError(t, blocker.Rollback(ctx))
	require.NoError(t, <-done)
	f.waitStatus(t, id, domain.StatusIdle)

	got := f.waitSidecarCommand(t, id, protocol.CommandSteeringMessage, 1)
	var sent protocol.SteeringMessage
	require.NoError(t, json.Unmarshal(got[0], &sent))
	assert.Equal(t, msg.String(), sent.MessageID)
}
