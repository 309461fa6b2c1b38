package api

import (
	"time"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/postgres/queries"
)

// Webhook is one of the caller's webhooks, without its secret.
type Webhook struct {
	ID                      uuid.UUID  `json:"id" doc:"The webhook's id." example:"7d3c2b1a-0f9e-4d8c-b7a6-5e4f3d2c1b0a"`
	URL                     string     `json:"url" doc:"Where the deliveries are posted." example:"https://hooks.example.com/agentbus"`
	Description             string     `json:"description" doc:"What the webhook is for." example:"Chat alerts"`
	EventTypes              []string   `json:"eventTypes" doc:"The session event types delivered; empty for every one." example:"[\"session_waiting_for_input\",\"agent_session_failed\"]"`
	SessionID               *uuid.UUID `json:"sessionId,omitempty" doc:"Only this session's events." example:"3f2a1b0c-9d8e-4f7a-b6c5-d4e3f2a1b0c9"`
	TemplateID              *uuid.UUID `json:"templateId,omitempty" doc:"Only the events of sessions of this template." example:"3c9d2e1f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"`
	Enabled                 bool       `json:"enabled" doc:"Whether events are delivered. A disabled webhook keeps its pending deliveries, sent once it is enabled again." example:"true"`
	ConsecutiveFailures     int        `json:"consecutiveFailures" doc:"Deliveries failed in a row, each after its last retry." example:"0"`
	DisabledReason          string     `json:"disabledReason,omitempty" doc:"Why the worker disabled the webhook: too many deliveries in a row failed. Enabling it again clears this." example:"disabled after 5 deliveries in a row failed"`
	DisabledAt              *time.Time `json:"disabledAt,omitempty" doc:"When the worker disabled it." example:"2026-03-01T08:00:00Z"`
	PreviousSecretExpiresAt *time.Time `json:"previousSecretExpiresAt,omitempty" doc:"Until when the secret replaced by the last rotation still signs deliveries, beside the new one." example:"2026-03-02T08:00:00Z"`
	CreatedAt               time.Time  `json:"createdAt" doc:"When it was created." example:"2026-03-01T08:00:00Z"`
	UpdatedAt               time.Time  `json:"updatedAt" doc:"When it last changed." example:"2026-03-01T08:00:00Z"`
}

// WebhookWithSecret is a webhook with its signing secret, shown once: when
// it is created and when its secret is rotated.
type WebhookWithSecret struct {
	Webhook
	Secret string `json:"secret" doc:"The signing secret (Standard Webhooks, whsec_ and base64): keep it, it is not shown again." example:"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"`
}

// WebhookList is the caller's webhooks, oldest first.
type WebhookList struct {
	Webhooks []Webhook `json:"webhooks" doc:"Your webhooks, oldest first."`
}

// WebhookDelivery is one event's delivery to a webhook.
type WebhookDelivery struct {
	ID              uuid.UUID  `json:"id" doc:"The delivery's id." example:"1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"`
	EventID         string     `json:"eventId" doc:"The event's id, sent as webhook-id: receivers drop repeats by it." example:"0f9e8d7c-6b5a-4c3d-9e2f-1a0b9c8d7e6f"`
	EventType       string     `json:"eventType" doc:"The event's type." example:"agent_session_failed"`
	SessionID       *uuid.UUID `json:"sessionId,omitempty" doc:"The event's session; none for a test event." example:"3f2a1b0c-9d8e-4f7a-b6c5-d4e3f2a1b0c9"`
	Status          string     `json:"status" enum:"pending,delivered,failed" doc:"pending (to be sent or retried), delivered (answered 2xx) or failed (after its last retry)." example:"delivered"`
	Attempts        int        `json:"attempts" doc:"Attempts made." example:"1"`
	NextAttemptAt   *time.Time `json:"nextAttemptAt,omitempty" doc:"When a pending delivery is tried next." example:"2026-03-01T08:05:00Z"`
	EnqueuedAt      time.Time  `json:"enqueuedAt" doc:"When it was enqueued." example:"2026-03-01T08:00:00Z"`
	LastAttemptAt   *time.Time `json:"lastAttemptAt,omitempty" doc:"When it was last tried." example:"2026-03-01T08:00:00Z"`
	StatusCode      *int       `json:"statusCode,omitempty" doc:"The HTTP status of the last answer." example:"200"`
	LatencyMs       *int       `json:"latencyMs,omitempty" doc:"How long the last attempt took to be answered, in milliseconds." example:"42"`
	Error           string     `json:"error,omitempty" doc:"Why the last attempt failed." example:"answered 503 Service Unavailable"`
	ResponseExcerpt string     `json:"responseExcerpt,omitempty" doc:"The start of the last answer's body (512 bytes at most)." example:"ok"`
	DeliveredAt     *time.Time `json:"deliveredAt,omitempty" doc:"When a 2xx answer came." example:"2026-03-01T08:00:00Z"`
}

// WebhookDeliveryList is a webhook's delivery log, newest first.
type WebhookDeliveryList struct {
	Deliveries []WebhookDelivery `json:"deliveries" doc:"The deliveries, newest first."`
}

func webhookOf(w queries.Webhook) Webhook {
	out := Webhook{ID: w.ID, URL: w.URL, Description: w.Description, EventTypes: w.EventTypes, SessionID: w.SessionID,
		TemplateID: w.TemplateID, Enabled: w.Enabled, ConsecutiveFailures: w.ConsecutiveFailures, DisabledAt: w.DisabledAt,
		CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt}
	if out.EventTypes == nil {
		out.EventTypes = []string{}
	}
	if w.DisabledReason != nil {
		out.DisabledReason = *w.DisabledReason
	}
	if w.PreviousSecretUntil != nil && w.PreviousSecretUntil.After(time.Now()) {
		out.PreviousSecretExpiresAt = w.PreviousSecretUntil
	}
	return out
}

func deliveryOf(d queries.WebhookDelivery) WebhookDelivery {
	out := WebhookDelivery{ID: d.ID, EventID: d.EventID, EventType: d.EventType, SessionID: d.SessionID, Status: d.Status,
		Attempts: d.Attempts, NextAttemptAt: d.NextAttemptAt, EnqueuedAt: d.EnqueuedAt, LastAttemptAt: d.LastAttemptAt,
		StatusCode: d.LastStatusCode, LatencyMs: d.LastLatencyMs, DeliveredAt: d.DeliveredAt}
	if d.LastError != nil {
		out.Error = *d.LastError
	}
	if d.ResponseExcerpt != nil {
		out.ResponseExcerpt = *d.ResponseExcerpt
	}
	return out
}
