package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Webhook is one of the caller's webhooks (the API's Webhook), with its
// secret when it was just created or rotated.
type Webhook struct {
	ID                      string     `json:"id"`
	URL                     string     `json:"url"`
	Description             string     `json:"description"`
	EventTypes              []string   `json:"eventTypes"`
	SessionID               string     `json:"sessionId,omitempty"`
	TemplateID              string     `json:"templateId,omitempty"`
	Enabled                 bool       `json:"enabled"`
	ConsecutiveFailures     int        `json:"consecutiveFailures"`
	DisabledReason          string     `json:"disabledReason,omitempty"`
	PreviousSecretExpiresAt *time.Time `json:"previousSecretExpiresAt,omitempty"`
	CreatedAt               time.Time  `json:"createdAt"`
	Secret                  string     `json:"secret,omitempty"`
}

// WebhookList is the caller's webhooks.
type WebhookList struct {
	Webhooks []Webhook `json:"webhooks"`
}

// NewWebhook creates a webhook (the API's WebhookRequest).
type NewWebhook struct {
	URL         string   `json:"url"`
	Description string   `json:"description,omitempty"`
	EventTypes  []string `json:"eventTypes,omitempty"`
	SessionID   string   `json:"sessionId,omitempty"`
	TemplateID  string   `json:"templateId,omitempty"`
}

// Delivery is one event's delivery to a webhook.
type Delivery struct {
	ID              string     `json:"id"`
	EventID         string     `json:"eventId"`
	EventType       string     `json:"eventType"`
	SessionID       string     `json:"sessionId,omitempty"`
	Status          string     `json:"status"`
	Attempts        int        `json:"attempts"`
	NextAttemptAt   *time.Time `json:"nextAttemptAt,omitempty"`
	EnqueuedAt      time.Time  `json:"enqueuedAt"`
	StatusCode      *int       `json:"statusCode,omitempty"`
	LatencyMs       *int       `json:"latencyMs,omitempty"`
	Error           string     `json:"error,omitempty"`
	ResponseExcerpt string     `json:"responseExcerpt,omitempty"`
}

// DeliveryList is a webhook's delivery log, newest first.
type DeliveryList struct {
	Deliveries []Delivery `json:"deliveries"`
}

func webhookPath(id string, parts ...string) string {
	p := "/api/agents/webhooks/" + url.PathEscape(id)
	for _, part := range parts {
		p += "/" + url.PathEscape(part)
	}
	return p
}

// Webhooks lists the caller's webhooks.
func (c *Client) Webhooks(ctx context.Context) (Answer[WebhookList], error) {
	return call[WebhookList](ctx, c, http.MethodGet, "/api/agents/webhooks", nil)
}

// Webhook reads one of the caller's webhooks.
func (c *Client) Webhook(ctx context.Context, id string) (Answer[Webhook], error) {
	return call[Webhook](ctx, c, http.MethodGet, webhookPath(id), nil)
}

// CreateWebhook creates a webhook; the answer holds its secret.
func (c *Client) CreateWebhook(ctx context.Context, w NewWebhook) (Answer[Webhook], error) {
	return call[Webhook](ctx, c, http.MethodPost, "/api/agents/webhooks", w)
}

// SetWebhookEnabled enables or disables a webhook.
func (c *Client) SetWebhookEnabled(ctx context.Context, id string, enabled bool) (Answer[Webhook], error) {
	return call[Webhook](ctx, c, http.MethodPatch, webhookPath(id), map[string]bool{"enabled": enabled})
}

// DeleteWebhook deletes a webhook.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	_, err := call[struct{}](ctx, c, http.MethodDelete, webhookPath(id), nil)
	return err
}

// RotateWebhook makes a new secret; the old one signs too for grace.
func (c *Client) RotateWebhook(ctx context.Context, id string, grace time.Duration) (Answer[Webhook], error) {
	return call[Webhook](ctx, c, http.MethodPost, webhookPath(id, "rotate"), map[string]int64{"graceSeconds": int64(grace.Seconds())})
}

// Deliveries lists a webhook's deliveries, only those of status unless "".
func (c *Client) Deliveries(ctx context.Context, id, status string) (Answer[DeliveryList], error) {
	path := webhookPath(id, "deliveries")
	if status != "" {
		path += "?status=" + url.QueryEscape(status)
	}
	return call[DeliveryList](ctx, c, http.MethodGet, path, nil)
}

// Redeliver sends a delivery again.
func (c *Client) Redeliver(ctx context.Context, id, delivery string) (Answer[Delivery], error) {
	return call[Delivery](ctx, c, http.MethodPost, webhookPath(id, "deliveries", delivery, "redeliver"), nil)
}

// TestWebhook enqueues a test event to a webhook.
func (c *Client) TestWebhook(ctx context.Context, id string) (Answer[Delivery], error) {
	return call[Delivery](ctx, c, http.MethodPost, webhookPath(id, "test"), nil)
}
