package queries

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The reads of the webhooks worker, for every owner.

// WebhooksForEvent returns the session's status and the ids of its
// owner's enabled webhooks that want an event of type eventType of it
// (by their event types, session and template filters) and existed when
// it occurred (a new webhook gets no past events), in one read; a
// session that does not exist has none.
func WebhooksForEvent(ctx context.Context, db DB, session uuid.UUID, eventType string, occurredAt time.Time) (status string, hooks []uuid.UUID, err error) {
	rows, err := db.Query(ctx, `SELECT s.status, w.id FROM sessions s
		JOIN webhooks w ON w.owner_id = s.owner_id
		WHERE s.id = $1 AND w.enabled
		  AND (cardinality(w.event_types) = 0 OR $2 = ANY (w.event_types))
		  AND (w.session_id IS NULL OR w.session_id = s.id)
		  AND (w.template_id IS NULL OR w.template_id = s.template_id)
		  AND w.created_at <= $3`, session, eventType, occurredAt)
	if err != nil {
		return "", nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&status, &id); err != nil {
			return "", nil, err
		}
		hooks = append(hooks, id)
	}
	return status, hooks, rows.Err()
}

// DueWebhooks returns the enabled webhooks with a delivery due by now.
func DueWebhooks(ctx context.Context, db DB, now time.Time) ([]uuid.UUID, error) {
	rows, err := db.Query(ctx, `SELECT w.id FROM webhooks w WHERE w.enabled AND EXISTS (
		SELECT 1 FROM webhook_deliveries d
		WHERE d.webhook_id = w.id AND d.status = 'pending' AND d.next_attempt_at <= $1)`, now)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
}

// WebhookQueueAges returns, per webhook with pending deliveries, how long
// its oldest pending delivery has waited by now.
func WebhookQueueAges(ctx context.Context, db DB, now time.Time) (map[uuid.UUID]time.Duration, error) {
	rows, err := db.Query(ctx, `SELECT webhook_id, min(enqueued_at) FROM webhook_deliveries
		WHERE status = 'pending' GROUP BY webhook_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[uuid.UUID]time.Duration{}
	for rows.Next() {
		var id uuid.UUID
		var oldest time.Time
		if err := rows.Scan(&id, &oldest); err != nil {
			return nil, err
		}
		out[id] = now.Sub(oldest)
	}
	return out, rows.Err()
}
