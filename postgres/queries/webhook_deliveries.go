package queries

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// WebhookDelivery is one event's delivery to a webhook, with the outcome
// of its last attempt.
type WebhookDelivery struct {
	ID              uuid.UUID
	WebhookID       uuid.UUID
	EventID         string
	EventType       string
	SessionID       *uuid.UUID
	Status          string
	Attempts        int
	NextAttemptAt   *time.Time
	EnqueuedAt      time.Time
	LastAttemptAt   *time.Time
	LastStatusCode  *int
	LastLatencyMs   *int
	LastError       *string
	ResponseExcerpt *string
	DeliveredAt     *time.Time
}

const deliveryColumns = `d.id, d.webhook_id, d.event_id, d.event_type, d.session_id, d.status, d.attempts,
	CASE WHEN d.status = 'pending' THEN d.next_attempt_at END, d.enqueued_at, d.last_attempt_at, d.last_status_code,
	d.last_latency_ms, d.last_error, d.response_excerpt, d.delivered_at`

func scanDelivery(row pgx.Row) (WebhookDelivery, error) {
	var d WebhookDelivery
	err := row.Scan(&d.ID, &d.WebhookID, &d.EventID, &d.EventType, &d.SessionID, &d.Status, &d.Attempts, &d.NextAttemptAt,
		&d.EnqueuedAt, &d.LastAttemptAt, &d.LastStatusCode, &d.LastLatencyMs, &d.LastError, &d.ResponseExcerpt, &d.DeliveredAt)
	return d, err
}

// WebhookDeliveries returns up to limit of the deliveries of the owner's
// webhook, newest first, only those of status unless it is "".
func (s *Store) WebhookDeliveries(ctx context.Context, owner, webhookID uuid.UUID, status string, limit int) ([]WebhookDelivery, error) {
	if _, err := s.Webhook(ctx, owner, webhookID); err != nil {
		return nil, err
	}
	return queryAll(ctx, s.db, "webhook deliveries", scanDelivery, "SELECT "+deliveryColumns+` FROM webhook_deliveries d
		WHERE d.webhook_id = $1 AND ($2 = '' OR d.status = $2)
		ORDER BY d.enqueued_at DESC, d.stream_seq DESC LIMIT $3`, webhookID, status, limit)
}

// WebhookDelivery returns one delivery of the owner's webhook.
func (s *Store) WebhookDelivery(ctx context.Context, owner, webhookID, id uuid.UUID) (WebhookDelivery, error) {
	d, err := scanDelivery(s.db.QueryRow(ctx, "SELECT "+deliveryColumns+` FROM webhook_deliveries d
		JOIN webhooks w ON w.id = d.webhook_id
		WHERE d.id = $1 AND d.webhook_id = $2 AND w.owner_id = $3`, id, webhookID, owner))
	if errors.Is(err, pgx.ErrNoRows) {
		return d, &NotFoundError{Entity: "delivery", ID: id.String()}
	}
	return d, err
}
