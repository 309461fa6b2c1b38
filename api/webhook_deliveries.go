package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/handlers/webhooks"
	"github.com/agentbus/agentbus/postgres"
)

type listDeliveriesInput struct {
	ID     string `path:"id" format:"uuid" doc:"The webhook's id." example:"7d3c2b1a-0f9e-4d8c-b7a6-5e4f3d2c1b0a"`
	Status string `query:"status" enum:"pending,delivered,failed" doc:"Only the deliveries in this status." example:"failed"`
	Limit  int    `query:"limit" minimum:"1" maximum:"500" default:"50" doc:"How many, newest first." example:"50"`
}

type deliveryIDInput struct {
	ID         string `path:"id" format:"uuid" doc:"The webhook's id." example:"7d3c2b1a-0f9e-4d8c-b7a6-5e4f3d2c1b0a"`
	DeliveryID string `path:"deliveryId" format:"uuid" doc:"The delivery's id." example:"1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"`
}

type deliveryListOutput struct{ Body WebhookDeliveryList }
type deliveryOutput struct{ Body WebhookDelivery }

// addWebhookDeliveryRoutes registers a webhook's delivery log, redelivery
// and test event.
func (s *Server) addWebhookDeliveryRoutes(api huma.API) {
	register(api, humanOp("list-webhook-deliveries", http.MethodGet, "/api/agents/webhooks/{id}/deliveries", "List a webhook's deliveries",
		"The delivery log, newest first: each event's status, attempts, next retry, and its last answer's status code, latency and excerpt.",
		"Webhooks", queryErrors), s.listDeliveries)
	redeliver := humanOp("redeliver-webhook-delivery", http.MethodPost, "/api/agents/webhooks/{id}/deliveries/{deliveryId}/redeliver",
		"Redeliver an event", "Sends a delivered or failed delivery again, with the same webhook-id, after its session's pending ones "+
			"to this webhook; 409 if it is pending already.", "Webhooks", commandErrors)
	redeliver.DefaultStatus = http.StatusAccepted
	register(api, redeliver, s.redeliver)
	test := humanOp("test-webhook", http.MethodPost, "/api/agents/webhooks/{id}/test", "Send a test event",
		"Enqueues an event of type webhook_test to the webhook, sent like any other; 409 if the webhook is disabled.", "Webhooks", commandErrors)
	test.DefaultStatus = http.StatusAccepted
	register(api, test, s.testWebhook)
}

func (s *Server) listDeliveries(ctx context.Context, in *listDeliveriesInput) (*deliveryListOutput, error) {
	owner, id, err := s.readOwned(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	ds, err := s.deps.Queries.WebhookDeliveries(ctx, owner, id, in.Status, in.Limit)
	if err != nil {
		return nil, err
	}
	out := WebhookDeliveryList{Deliveries: make([]WebhookDelivery, len(ds))}
	for i, d := range ds {
		out.Deliveries[i] = deliveryOf(d)
	}
	return &deliveryListOutput{Body: out}, nil
}

func (s *Server) redeliver(ctx context.Context, in *deliveryIDInput) (*deliveryOutput, error) {
	owner, hook, err := s.writeWebhook(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	id, err := parseID("path.deliveryId", in.DeliveryID)
	if err != nil {
		return nil, err
	}
	d, err := s.deps.Queries.WebhookDelivery(ctx, owner, hook, id)
	if err != nil {
		return nil, err
	}
	if d.Status == postgres.DeliveryPending {
		return nil, NewKindError(KindConflict, "the delivery is pending already: it is sent at its next attempt").
			WithCurrentStatus(d.Status)
	}
	if _, err := postgres.RedeliverWebhookDelivery(ctx, s.deps.WebhookDB, owner, hook, id, time.Now()); err != nil {
		return nil, err
	}
	return s.delivery(ctx, owner, hook, id)
}

func (s *Server) testWebhook(ctx context.Context, in *webhookIDInput) (*deliveryOutput, error) {
	owner, hook, err := s.writeWebhook(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	w, err := s.deps.Queries.Webhook(ctx, owner, hook)
	if err != nil {
		return nil, err
	}
	if !w.Enabled {
		return nil, NewKindError(KindConflict, "the webhook is disabled: enable it to send events").WithCurrentStatus("disabled")
	}
	d, err := webhooks.TestDelivery(hook, time.Now())
	if err != nil {
		return nil, err
	}
	if err := postgres.EnqueueWebhookDeliveries(ctx, s.deps.WebhookDB, []postgres.NewDelivery{d}); err != nil {
		return nil, err
	}
	return s.delivery(ctx, owner, hook, d.ID)
}

func (s *Server) delivery(ctx context.Context, owner, hook, id uuid.UUID) (*deliveryOutput, error) {
	d, err := s.deps.Queries.WebhookDelivery(ctx, owner, hook, id)
	if err != nil {
		return nil, err
	}
	return &deliveryOutput{Body: deliveryOf(d)}, nil
}
