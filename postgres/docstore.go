package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/domain"
)

// loadDoc reads the document and version of one aggregate row.
func loadDoc(ctx context.Context, q Querier, table string, idColumn string, id uuid.UUID, into any) (int64, error) {
	var raw []byte
	var version int64
	err := q.QueryRow(ctx, "SELECT doc, version FROM "+table+" WHERE "+idColumn+" = $1", id).Scan(&raw, &version)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("%s %s: %w", table, id, ErrNotFound)
	}
	if err != nil {
		return 0, err
	}
	if err := jsonv1.Unmarshal(raw, into); err != nil {
		return 0, fmt.Errorf("%s %s: stored document unreadable: %w", table, id, err)
	}
	return version, nil
}

// saveVersioned updates a row if it still has the version that was loaded.
// columns are set alongside doc and version.
func saveVersioned(ctx context.Context, tx pgx.Tx, table, idColumn string, id uuid.UUID, loaded int64, doc any, columns map[string]any) error {
	sql, args, check, err := versionedUpdate(table, idColumn, id, loaded, doc, columns)
	if err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, sql, args...)
	if err != nil {
		return err
	}
	return check(tag)
}

// versionedUpdate is the statement of saveVersioned, and the check of its
// result that tells a version conflict.
func versionedUpdate(table, idColumn string, id uuid.UUID, loaded int64, doc any, columns map[string]any) (string, []any, func(pgconn.CommandTag) error, error) {
	raw, err := json.Marshal(doc)
	if err != nil {
		return "", nil, nil, err
	}
	set := "doc = $3, version = version + 1"
	args := []any{id, loaded, raw}
	for _, name := range sortedKeys(columns) {
		args = append(args, columns[name])
		set += fmt.Sprintf(", %s = $%d", name, len(args))
	}
	check := func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%s %s: %w", table, id, ErrVersionConflict)
		}
		return nil
	}
	return "UPDATE " + table + " SET " + set + " WHERE " + idColumn + " = $1 AND version = $2", args, check, nil
}

// checkedVersionedUpdate is versionedUpdate checked in the server: when
// the row changed since it was loaded, the statement fails (see
// versionConflictFrom) instead of reporting no row updated, so that it can
// go out in one batch with the transaction's COMMIT, which the failure
// then keeps from running.
func checkedVersionedUpdate(table, idColumn string, id uuid.UUID, loaded int64, doc any, columns map[string]any) (string, []any, error) {
	sql, args, _, err := versionedUpdate(table, idColumn, id, loaded, doc, columns)
	if err != nil {
		return "", nil, err
	}
	return "WITH updated AS (" + sql + " RETURNING 1) SELECT version_conflict('" + table +
		"', $1::text) WHERE NOT EXISTS (SELECT FROM updated)", args, nil
}

// versionConflictCode is the SQLSTATE of version_conflict (migration 013).
const versionConflictCode = "AB409"

// versionConflictFrom returns err as an ErrVersionConflict when it is the
// failure of a checkedVersionedUpdate, and unchanged otherwise.
func versionConflictFrom(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == versionConflictCode {
		return fmt.Errorf("%s: %w", pgErr.Message, ErrVersionConflict)
	}
	return err
}

// insertDoc inserts a new aggregate row at version 1.
func insertDoc(ctx context.Context, tx pgx.Tx, table, idColumn string, id uuid.UUID, doc any, columns map[string]any) error {
	raw, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	names := idColumn + ", doc, version"
	values := "$1, $2, 1"
	args := []any{id, raw}
	for _, name := range sortedKeys(columns) {
		args = append(args, columns[name])
		names += ", " + name
		values += fmt.Sprintf(", $%d", len(args))
	}
	_, err = tx.Exec(ctx, "INSERT INTO "+table+" ("+names+") VALUES ("+values+")", args...)
	if IsUniqueViolation(err) {
		return fmt.Errorf("%s %s: %w", table, id, domain.ErrDuplicate)
	}
	return err
}

// writeEvents appends an aggregate's raised events to the outbox; version
// is the aggregate's version once this transaction commits.
func writeEvents(ctx context.Context, tx pgx.Tx, version int64, events []domain.Event) error {
	if len(events) == 0 {
		return nil
	}
	msgs := make([]OutboxMessage, 0, len(events))
	for _, ev := range events {
		data, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("encode %s: %w", ev.EventType(), err)
		}
		id := uuid.New()
		env := bus.Envelope{
			ID:          id.String(),
			Type:        ev.EventType(),
			Aggregate:   ev.AggregateType(),
			AggregateID: ev.AggregateID().String(),
			Version:     version,
			OwnerID:     ev.AggregateOwnerID().String(),
			OccurredAt:  ev.EventTime(),
			Data:        data,
		}
		payload, err := json.Marshal(env)
		if err != nil {
			return err
		}
		msgs = append(msgs, OutboxMessage{
			ID:          id,
			Subject:     bus.EventSubject(env.Aggregate, env.AggregateID, env.Type),
			Aggregate:   env.Aggregate,
			AggregateID: ev.AggregateID(),
			Type:        env.Type,
			Payload:     payload,
		})
	}
	return WriteOutbox(ctx, tx, msgs)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
