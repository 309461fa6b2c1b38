package postgres

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
)

// WebhookDB is what the webhook writes need: a pool, a connection or a
// transaction.
type WebhookDB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// NewWebhook is a webhook to create.
type NewWebhook struct {
	ID, Owner   uuid.UUID
	URL         string
	Description string
	EventTypes  []string
	SessionID   *uuid.UUID
	TemplateID  *uuid.UUID
	Enabled     bool
	Secret      string
	Now         time.Time
}

// CreateWebhook stores a new webhook.
func CreateWebhook(ctx context.Context, db WebhookDB, w NewWebhook) error {
	if w.EventTypes == nil {
		w.EventTypes = []string{}
	}
	_, err := db.Exec(ctx, `INSERT INTO webhooks
		(id, owner_id, url, description, event_types, session_id, template_id, enabled, secret, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)`,
		w.ID, w.Owner, w.URL, w.Description, w.EventTypes, w.SessionID, w.TemplateID, w.Enabled, w.Secret, w.Now)
	return err
}

// WebhookChanges are the fields of a webhook to change; nil keeps one.
type WebhookChanges struct {
	URL         *string
	Description *string
	EventTypes  *[]string
	Enabled     *bool
}

// UpdateWebhook changes the owner's webhook; found is false when the
// owner has no such webhook. Enabling it forgets the failures that
// disabled it.
func UpdateWebhook(ctx context.Context, db WebhookDB, owner, id uuid.UUID, c WebhookChanges, now time.Time) (found bool, err error) {
	tag, err := db.Exec(ctx, `UPDATE webhooks SET
		url = COALESCE($3, url),
		description = COALESCE($4, description),
		event_types = COALESCE($5, event_types),
		enabled = COALESCE($6, enabled),
		consecutive_failures = CASE WHEN $6 THEN 0 ELSE consecutive_failures END,
		disabled_reason = CASE WHEN $6 THEN NULL ELSE disabled_reason END,
		disabled_at = CASE WHEN $6 THEN NULL ELSE disabled_at END,
		updated_at = $7
		WHERE id = $1 AND owner_id = $2`, id, owner, c.URL, c.Description, c.EventTypes, c.Enabled, now)
	return tag.RowsAffected() == 1, err
}

// DeleteWebhook deletes the owner's webhook and its delivery log; found
// is false when the owner has no such webhook.
func DeleteWebhook(ctx context.Context, db WebhookDB, owner, id uuid.UUID) (found bool, err error) {
	tag, err := db.Exec(ctx, "DELETE FROM webhooks WHERE id = $1 AND owner_id = $2", id, owner)
	return tag.RowsAffected() == 1, err
}

// RotateWebhookSecret makes secret the owner's webhook's signing secret;
// the one it replaces still signs until graceUntil. found is false when
// the owner has no such webhook.
func RotateWebhookSecret(ctx context.Context, db WebhookDB, owner, id uuid.UUID, secret string, graceUntil, now time.Time) (found bool, err error) {
	tag, err := db.Exec(ctx, `UPDATE webhooks SET previous_secret = secret, previous_secret_until = $4,
		secret = $3, updated_at = $5 WHERE id = $1 AND owner_id = $2`, id, owner, secret, graceUntil, now)
	return tag.RowsAffected() == 1, err
}
