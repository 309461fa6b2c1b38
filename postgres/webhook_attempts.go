package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// WebhookAttemptDB is what the delivery loops need: writes that return
// rows.
type WebhookAttemptDB interface {
	WebhookDB
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ClaimedDelivery is a delivery an endpoint's loop took for one attempt,
// with what signing and sending it takes.
type ClaimedDelivery struct {
	ID        uuid.UUID
	WebhookID uuid.UUID
	EventID   string
	EventType string
	Body      []byte
	// Attempt is this attempt's number, from 1.
	Attempt    int
	EnqueuedAt time.Time
	URL        string
	// Secrets sign the delivery: the current secret, and the previous one
	// during its grace.
	Secrets []string
}

// claimDelivery takes the webhook's next due delivery that is its
// session's oldest pending one (so each session's events reach the
// webhook in order), marks the attempt and holds it for lease: a worker
// that dies during the attempt leaves it to be taken again once the lease
// is over. SKIP LOCKED lets copies of the worker share an endpoint.
const claimDelivery = `
UPDATE webhook_deliveries d SET attempts = d.attempts + 1, last_attempt_at = $2, next_attempt_at = $3
FROM webhooks w
WHERE w.id = d.webhook_id AND w.enabled AND d.id = (
	SELECT c.id FROM webhook_deliveries c
	WHERE c.webhook_id = $1 AND c.status = 'pending' AND c.next_attempt_at <= $2
	  AND (c.session_id IS NULL OR NOT EXISTS (
		SELECT 1 FROM webhook_deliveries e
		WHERE e.webhook_id = c.webhook_id AND e.session_id = c.session_id AND e.status = 'pending'
		  AND e.stream_seq < c.stream_seq))
	ORDER BY c.next_attempt_at, c.stream_seq
	LIMIT 1
	FOR UPDATE OF c SKIP LOCKED)
RETURNING d.id, d.webhook_id, d.event_id, d.event_type, d.body, d.attempts, d.enqueued_at, w.url,
	array_remove(ARRAY[w.secret, CASE WHEN w.previous_secret_until > $2 THEN w.previous_secret END], NULL)`

// ClaimWebhookDelivery takes the webhook's next due delivery for an
// attempt at now, held for lease; ok is false when none is due.
func ClaimWebhookDelivery(ctx context.Context, db WebhookAttemptDB, webhookID uuid.UUID, now time.Time, lease time.Duration) (d ClaimedDelivery, ok bool, err error) {
	var body string
	err = db.QueryRow(ctx, claimDelivery, webhookID, now, now.Add(lease)).Scan(
		&d.ID, &d.WebhookID, &d.EventID, &d.EventType, &body, &d.Attempt, &d.EnqueuedAt, &d.URL, &d.Secrets)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, false, nil
	}
	d.Body = []byte(body)
	return d, err == nil, err
}

// AttemptOutcome is what one attempt of a delivery found.
type AttemptOutcome struct {
	At         time.Time
	StatusCode int
	Latency    time.Duration
	Error      string
	Excerpt    string
}

// RecordWebhookDelivered records the claimed delivery as delivered and
// forgets its webhook's run of failures. Nothing is written if the
// delivery was claimed again since (its lease ran out).
func RecordWebhookDelivered(ctx context.Context, db WebhookAttemptDB, d ClaimedDelivery, o AttemptOutcome) error {
	batch := &pgx.Batch{}
	batch.Queue(`UPDATE webhook_deliveries SET status = 'delivered', delivered_at = $3, last_status_code = $4,
		last_latency_ms = $5, last_error = NULL, response_excerpt = $6
		WHERE id = $1 AND attempts = $2 AND status = 'pending'`,
		d.ID, d.Attempt, o.At, o.StatusCode, o.Latency.Milliseconds(), o.Excerpt)
	batch.Queue("UPDATE webhooks SET consecutive_failures = 0 WHERE id = $1 AND consecutive_failures > 0", d.WebhookID)
	return sendBatch(ctx, db, batch)
}

// RecordWebhookAttemptFailed records a failed attempt of the claimed
// delivery: with next, it is retried then; without, the delivery has
// failed, and its webhook's run of failures grows, disabling the webhook
// at disableAfter. disabled reports that this failure disabled it.
func RecordWebhookAttemptFailed(ctx context.Context, db WebhookAttemptDB, d ClaimedDelivery, o AttemptOutcome, next *time.Time, disableAfter int) (disabled bool, err error) {
	var code *int
	if o.StatusCode != 0 {
		code = &o.StatusCode
	}
	if next != nil {
		_, err := db.Exec(ctx, `UPDATE webhook_deliveries SET next_attempt_at = $3, last_status_code = $4,
			last_latency_ms = $5, last_error = $6, response_excerpt = $7
			WHERE id = $1 AND attempts = $2 AND status = 'pending'`,
			d.ID, d.Attempt, *next, code, o.Latency.Milliseconds(), o.Error, o.Excerpt)
		return false, err
	}
	err = db.QueryRow(ctx, `WITH failed AS (
		UPDATE webhook_deliveries SET status = 'failed', last_status_code = $4, last_latency_ms = $5,
			last_error = $6, response_excerpt = $7
		WHERE id = $1 AND attempts = $2 AND status = 'pending' RETURNING webhook_id)
	UPDATE webhooks w SET consecutive_failures = w.consecutive_failures + 1,
		enabled = w.enabled AND w.consecutive_failures + 1 < $8,
		disabled_reason = CASE WHEN w.enabled AND w.consecutive_failures + 1 >= $8
			THEN 'disabled after ' || (w.consecutive_failures + 1) || ' deliveries in a row failed' ELSE w.disabled_reason END,
		disabled_at = CASE WHEN w.enabled AND w.consecutive_failures + 1 >= $8 THEN $3 ELSE w.disabled_at END
	FROM failed WHERE w.id = failed.webhook_id
	RETURNING NOT w.enabled AND w.disabled_at = $3`,
		d.ID, d.Attempt, o.At, code, o.Latency.Milliseconds(), o.Error, o.Excerpt, disableAfter).Scan(&disabled)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return disabled, err
}
