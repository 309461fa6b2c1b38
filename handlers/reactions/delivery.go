package reactions

import (
	"context"

	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/outbox"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// DeliveryConsumer is the durable consumer of the message delivery
// reaction. Renaming it replays every event to it: keep it stable.
const DeliveryConsumer = "delivery"

// deliveryTriggers are the events after which a session may take messages
// it could not take before: a new message, a promotion, or a status that
// accepts more.
var deliveryTriggers = []string{
	bus.EventFilter(domain.MessageEnqueuedEvent{}),
	bus.EventFilter(domain.MessagePromotedToImmediateEvent{}),
	bus.EventFilter(domain.AgentSessionStartedEvent{}),
	bus.EventFilter(domain.SessionResumedEvent{}),
	bus.EventFilter(domain.SessionInterruptedEvent{}),
	bus.EventFilter(domain.AgentSessionTurnCompletedEvent{}),
	bus.EventFilter(domain.AgentSessionOutputReadyEvent{}),
	bus.EventFilter(domain.SessionInputReceivedEvent{}),
	bus.EventFilter(domain.SessionPlanApprovedEvent{}),
	bus.EventFilter(domain.SessionPlanRejectedEvent{}),
}

// Delivery sends a session's pending messages to its sidecar as soon as
// its status takes them (seed 8.10): Immediate messages at once while it
// runs; every message, Immediate first, when it is Idle or Interrupted;
// none while it waits for input or approval, is paused, queued or in a
// lifecycle transition. The sidecar acknowledges each with
// message_delivered, which marks it delivered.
type Delivery struct {
	JS jetstream.JetStream
	DB *pgxpool.Pool
}

// Run consumes the triggering events until ctx ends.
func (d Delivery) Run(ctx context.Context) error {
	return bus.Run(ctx, d.JS, bus.RunnerConfig{
		Stream: bus.StreamEvents, Consumer: DeliveryConsumer, Handler: d.Handle,
		Concurrency: 4, OrderKey: sessionKey, FilterSubjects: deliveryTriggers,
	})
}

// sessionKey orders the events of one session, whichever its aggregate:
// a session's events and its queue's name the session's id in their
// subject (bus.EventSubject), so the key is read there, without decoding
// the event; the envelope is decoded only for a subject of another form.
func sessionKey(m jetstream.Msg) string {
	if id, ok := bus.EventAggregateID(m.Subject()); ok {
		return id
	}
	env, err := bus.DecodeEnvelope(m.Data())
	if err != nil {
		return m.Subject()
	}
	return env.AggregateID
}

// Handle sends every pending message the session's current status takes.
// A message is always sent under the same command id, so one sent before
// is not written to the sidecar twice.
//
// An enqueued message's event carries the message and the status the
// session had when it committed, which the session keeps until then (see
// postgres.Queues.LoadHolding): an Immediate message enqueued while the
// session ran is steering, the case that must be fast, and it is sent from
// the event alone; a message that status does not take is left to the
// status change that will take it, which reads the queue after this
// message joined it. Every other trigger reads the session's status and
// queue (one round trip) and sends what the status takes, Immediate first.
func (d Delivery) Handle(ctx context.Context, m jetstream.Msg) error {
	env, err := bus.DecodeEnvelope(m.Data())
	if err != nil {
		return bus.Permanent(err)
	}
	id, err := uuid.Parse(env.AggregateID)
	if err != nil {
		return bus.Permanent(err)
	}
	if ev, ok := enqueued(env); ok {
		if isSteering(ev) {
			return deliver(ctx, d.JS, id, ev.OwnerID, domain.SessionMessage{MessageID: ev.MessageID, Content: ev.Content, Priority: ev.Priority})
		}
		if ev.SessionStatus != "" && !domain.DeliverableIn(ev.SessionStatus, ev.Priority) {
			return nil
		}
	}
	sq, err := postgres.Queues{}.Load(ctx, d.DB, id, uuid.Nil)
	if err != nil {
		return err
	}
	for _, msg := range sq.Queue.Pending() {
		if !domain.DeliverableIn(sq.Status, msg.Priority) {
			continue
		}
		if err := deliver(ctx, d.JS, id, sq.OwnerID, msg); err != nil {
			return err
		}
	}
	return nil
}

// enqueued returns the event of env when it is a message_enqueued.
func enqueued(env bus.Envelope) (domain.MessageEnqueuedEvent, bool) {
	var ev domain.MessageEnqueuedEvent
	if env.Type != (domain.MessageEnqueuedEvent{}).EventType() || jsonv1.Unmarshal(env.Data, &ev) != nil {
		return ev, false
	}
	return ev, true
}

// isSteering reports whether an enqueued message steers a running
// session. An event without the message (or the status it met) does not:
// the queue is read instead.
func isSteering(ev domain.MessageEnqueuedEvent) bool {
	return ev.SessionStatus == domain.StatusRunning && ev.Priority == domain.PriorityImmediate &&
		ev.Content != "" && ev.MessageID != uuid.Nil && ev.OwnerID != uuid.Nil
}

// deliver sends one message to the session's sidecar.
func deliver(ctx context.Context, js jetstream.JetStream, session, owner uuid.UUID, msg domain.SessionMessage) error {
	return sendToSidecarAs(ctx, js, session.String(), owner.String(), deliveryID(msg.MessageID),
		protocol.CommandSteeringMessage, steeringData(msg))
}

// deliveryID is the id of the sidecar command that delivers a message:
// one id per message, however often and by whom it is sent.
func deliveryID(message uuid.UUID) uuid.UUID {
	return uuid.NewSHA1(sidecarNamespace, []byte("deliver/"+message.String()+"/"+protocol.CommandSteeringMessage))
}

func steeringData(msg domain.SessionMessage) protocol.SteeringMessage {
	return protocol.SteeringMessage{MessageID: msg.MessageID.String(), Content: msg.Content, Priority: string(msg.Priority)}
}

// SteeringAlong returns, for a committed event that steers a running
// session (see Handle), the steering_message this reaction sends for it,
// and nothing for any other event. The worker that committed the event
// sends it along with the event, at the same time: steering then waits
// neither for the event to be stored nor for this reaction to be handed
// it. The reaction still sends it when the event arrives, under the same
// id, and JetStream drops that copy as a duplicate; so a worker that dies
// before sending it loses nothing, and the message needs no outbox row of
// its own.
func SteeringAlong(ctx context.Context, ev outbox.Message) []*nats.Msg {
	if ev.Type != (domain.MessageEnqueuedEvent{}).EventType() {
		return nil
	}
	env, err := bus.DecodeEnvelope(ev.Payload)
	if err != nil {
		return nil
	}
	e, ok := enqueued(env)
	if !ok || !isSteering(e) {
		return nil
	}
	msg, err := sidecarMsg(ctx, env.AggregateID, e.OwnerID.String(), deliveryID(e.MessageID), protocol.CommandSteeringMessage,
		steeringData(domain.SessionMessage{MessageID: e.MessageID, Content: e.Content, Priority: e.Priority}))
	if err != nil {
		return nil
	}
	return []*nats.Msg{msg}
}
