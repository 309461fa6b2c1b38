package webhooks

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/postgres/queries"
)

// deliveryNamespace derives a delivery's id from its event and webhook,
// so an event enqueued twice names the same delivery.
var deliveryNamespace = uuid.MustParse("9b1e3f6a-52c4-4d8e-a7f0-3c2b1d4e5f60")

// DeliveryID is the id of the delivery of the event to the webhook.
func DeliveryID(webhook uuid.UUID, eventID string) uuid.UUID {
	return uuid.NewSHA1(deliveryNamespace, []byte(webhook.String()+"/"+eventID))
}

// enqueue stores a delivery of one session event for each of its owner's
// webhooks that wants it. The event is acked once they are stored; a
// redelivered event stores nothing new.
func (w *Worker) enqueue(ctx context.Context, m jetstream.Msg) error {
	env, err := bus.DecodeEnvelope(m.Data())
	if err != nil {
		return bus.Permanent(err)
	}
	if env.Aggregate != domain.AggregateSession {
		return nil
	}
	session, err := uuid.Parse(env.AggregateID)
	if err != nil {
		return bus.Permanent(fmt.Errorf("session id %q: %w", env.AggregateID, err))
	}
	status, hooks, err := queries.WebhooksForEvent(ctx, w.cfg.DB, session, env.Type, env.OccurredAt)
	if err != nil || len(hooks) == 0 {
		return err
	}
	meta, err := m.Metadata()
	if err != nil {
		return bus.Permanent(err)
	}
	body, err := json.Marshal(Payload{Type: env.Type, Timestamp: env.OccurredAt.UTC(), Data: EventData{
		EventID: env.ID, SessionID: env.AggregateID, Status: status,
		URL: sessionLink(w.cfg.LinkBase, env.AggregateID), Event: env.Data}})
	if err != nil {
		return bus.Permanent(err)
	}
	now := w.now()
	ds := make([]postgres.NewDelivery, len(hooks))
	for i, h := range hooks {
		ds[i] = postgres.NewDelivery{ID: DeliveryID(h, env.ID), WebhookID: h, EventID: env.ID, EventType: env.Type,
			SessionID: &session, StreamSeq: meta.Sequence.Stream, Body: body, EnqueuedAt: now}
	}
	return postgres.EnqueueWebhookDeliveries(ctx, w.cfg.DB, ds)
}
