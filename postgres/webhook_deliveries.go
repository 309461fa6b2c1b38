package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// WebhookDeliveriesChannel is the notification channel on which an
// enqueue wakes the webhooks worker's dispatcher.
const WebhookDeliveriesChannel = "webhook_deliveries"

// The statuses of a delivery.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
)

// NewDelivery is an event to deliver to one webhook.
type NewDelivery struct {
	ID         uuid.UUID
	WebhookID  uuid.UUID
	EventID    string
	EventType  string
	SessionID  *uuid.UUID
	StreamSeq  uint64
	Body       []byte
	EnqueuedAt time.Time
}

// EnqueueWebhookDeliveries stores the deliveries, due at once, and wakes
// the dispatcher when they commit. A delivery of an event to a webhook
// already stored is left as it is, so an event handled twice is
// delivered once.
func EnqueueWebhookDeliveries(ctx context.Context, db WebhookDB, ds []NewDelivery) error {
	if len(ds) == 0 {
		return nil
	}
	batch := &pgx.Batch{}
	for _, d := range ds {
		batch.Queue(`INSERT INTO webhook_deliveries
			(id, webhook_id, event_id, event_type, session_id, stream_seq, body, status, next_attempt_at, enqueued_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $8)
			ON CONFLICT (webhook_id, event_id) DO NOTHING`,
			d.ID, d.WebhookID, d.EventID, d.EventType, d.SessionID, int64(d.StreamSeq), string(d.Body), d.EnqueuedAt)
	}
	batch.Queue("SELECT pg_notify('" + WebhookDeliveriesChannel + "', '')")
	return sendBatch(ctx, db, batch)
}

// sendBatch sends batch in one round trip, inside a transaction unless db
// is one.
func sendBatch(ctx context.Context, db WebhookDB, batch *pgx.Batch) error {
	type batcher interface {
		SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	}
	type beginner interface {
		Begin(ctx context.Context) (pgx.Tx, error)
	}
	if b, ok := db.(beginner); ok {
		tx, err := b.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	s, ok := db.(batcher)
	if !ok {
		return errors.New("postgres: the database takes no batch")
	}
	return s.SendBatch(ctx, batch).Close()
}

// RedeliverWebhookDelivery makes the owner's delivery due again at now,
// whatever its outcome was, and wakes the dispatcher; found is false when
// the owner has no such delivery on that webhook.
func RedeliverWebhookDelivery(ctx context.Context, db WebhookDB, owner, webhookID, id uuid.UUID, now time.Time) (found bool, err error) {
	tag, err := db.Exec(ctx, `UPDATE webhook_deliveries d SET status = 'pending', next_attempt_at = $4,
		attempts = 0, delivered_at = NULL
		FROM webhooks w
		WHERE d.id = $3 AND d.webhook_id = $2 AND w.id = d.webhook_id AND w.owner_id = $1`, owner, webhookID, id, now)
	if err != nil || tag.RowsAffected() != 1 {
		return false, err
	}
	_, err = db.Exec(ctx, "SELECT pg_notify($1, '')", WebhookDeliveriesChannel)
	return true, err
}
