package reactions

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
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
	"agents.evt.queue.*.message_enqueued",
	"agents.evt.queue.*.message_promoted_to_immediate",
	"agents.evt.session.*.agent_session_started",
	"agents.evt.session.*.session_resumed",
	"agents.evt.session.*.session_interrupted",
	"agents.evt.session.*.agent_session_turn_completed",
	"agents.evt.session.*.agent_session_output_ready",
	"agents.evt.session.*.session_input_received",
	"agents.evt.session.*.session_plan_approved",
	"agents.evt.session.*.session_plan_rejected",
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

// sessionKey orders the events of one session, whichever its aggregate.
func sessionKey(m jetstream.Msg) string {
	env, err := bus.DecodeEnvelope(m.Data())
	if err != nil {
		return m.Subject()
	}
	return env.AggregateID
}

// Handle sends every pending message the session's current status takes.
// A message is always sent under the same command id, so one sent before
// is not written to the sidecar twice.
func (d Delivery) Handle(ctx context.Context, m jetstream.Msg) error {
	env, err := bus.DecodeEnvelope(m.Data())
	if err != nil {
		return bus.Permanent(err)
	}
	id, err := uuid.Parse(env.AggregateID)
	if err != nil {
		return bus.Permanent(err)
	}
	s, err := postgres.Sessions{}.Get(ctx, d.DB, id)
	if err != nil {
		return err
	}
	q, err := postgres.Queues{}.Get(ctx, d.DB, id, s.OwnerID())
	if err != nil {
		return err
	}
	for _, msg := range q.Pending() {
		if !domain.DeliverableIn(s.Status(), msg.Priority) {
			continue
		}
		err := sendToSidecar(ctx, d.JS, id.String(), s.OwnerID().String(), "deliver/"+msg.MessageID.String(),
			protocol.CommandSteeringMessage, protocol.SteeringMessage{
				MessageID: msg.MessageID.String(), Content: msg.Content, Priority: string(msg.Priority)})
		if err != nil {
			return err
		}
	}
	return nil
}
