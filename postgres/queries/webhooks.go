package queries

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Webhook is one of an owner's webhooks, without its secrets.
type Webhook struct {
	ID                  uuid.UUID
	OwnerID             uuid.UUID
	URL                 string
	Description         string
	EventTypes          []string
	SessionID           *uuid.UUID
	TemplateID          *uuid.UUID
	Enabled             bool
	ConsecutiveFailures int
	DisabledReason      *string
	DisabledAt          *time.Time
	PreviousSecretUntil *time.Time
	CreatedAt           time.Time
	UpdatedAt           time.Time
}

const webhookColumns = `id, owner_id, url, description, event_types, session_id, template_id, enabled,
	consecutive_failures, disabled_reason, disabled_at, previous_secret_until, created_at, updated_at`

func scanWebhook(row pgx.Row) (Webhook, error) {
	var w Webhook
	err := row.Scan(&w.ID, &w.OwnerID, &w.URL, &w.Description, &w.EventTypes, &w.SessionID, &w.TemplateID, &w.Enabled,
		&w.ConsecutiveFailures, &w.DisabledReason, &w.DisabledAt, &w.PreviousSecretUntil, &w.CreatedAt, &w.UpdatedAt)
	return w, err
}

// Webhooks returns the owner's webhooks, oldest first.
func (s *Store) Webhooks(ctx context.Context, owner uuid.UUID) ([]Webhook, error) {
	return queryAll(ctx, s.db, "webhooks", scanWebhook,
		"SELECT "+webhookColumns+" FROM webhooks WHERE owner_id = $1 ORDER BY created_at, id", owner)
}

// queryAll runs the query sql, named what in its error, and reads each of
// its rows with scan; no row is an empty list.
func queryAll[T any](ctx context.Context, db DB, what string, scan func(pgx.Row) (T, error), sql string, args ...any) ([]T, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("queries: %s: %w", what, err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (T, error) { return scan(row) })
}

// Webhook returns the owner's webhook; another owner's is not found.
func (s *Store) Webhook(ctx context.Context, owner, id uuid.UUID) (Webhook, error) {
	w, err := scanWebhook(s.db.QueryRow(ctx, "SELECT "+webhookColumns+" FROM webhooks WHERE id = $1 AND owner_id = $2", id, owner))
	if errors.Is(err, pgx.ErrNoRows) {
		return w, &NotFoundError{Entity: "webhook", ID: id.String()}
	}
	return w, err
}

// Owns reports whether the owner has a session (entity "session") or a
// template (entity "template") of that id.
func (s *Store) Owns(ctx context.Context, owner uuid.UUID, entity string, id uuid.UUID) (bool, error) {
	table := map[string]string{"session": "sessions", "template": "templates"}[entity]
	if table == "" {
		return false, fmt.Errorf("queries: no owned %s", entity)
	}
	var ok bool
	err := s.db.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+table+" WHERE id = $1 AND owner_id = $2)", id, owner).Scan(&ok)
	return ok, err
}
