package postgres

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/domain"
)

// aggregate is what the document store needs of an aggregate root.
type aggregate interface {
	ID() uuid.UUID
	PopEvents() []domain.Event
}

// docRepo stores aggregates of one kind as the JSON document of their
// snapshot S, one row each keyed by id, with a version for optimistic
// concurrency, columns copied out of the snapshot for the queries, and
// their raised events in the outbox of the same transaction.
type docRepo[A aggregate, S any] struct {
	table    string
	snapshot func(A) S
	restore  func(S) (A, error)
	// version points at the snapshot's version field.
	version func(*S) *int64
	columns func(S) map[string]any
}

// add inserts a new aggregate at version 1.
func (r docRepo[A, S]) add(ctx context.Context, tx pgx.Tx, a A) error {
	snap := r.snapshot(a)
	*r.version(&snap) = 1
	if err := insertDoc(ctx, tx, r.table, "id", a.ID(), snap, r.columns(snap)); err != nil {
		return err
	}
	return writeEvents(ctx, tx, 1, a.PopEvents())
}

// get loads an aggregate (ErrNotFound when there is none).
func (r docRepo[A, S]) get(ctx context.Context, q Querier, id uuid.UUID) (A, error) {
	var snap S
	version, err := loadDoc(ctx, q, r.table, "id", id, &snap)
	if err != nil {
		var zero A
		return zero, err
	}
	*r.version(&snap) = version
	return r.restore(snap)
}

// update loads an aggregate, lets change modify it, and saves it with its
// events, provided nobody saved it since it was loaded (ErrVersionConflict
// otherwise). An error from change is returned as it is and nothing is
// saved.
func (r docRepo[A, S]) update(ctx context.Context, tx pgx.Tx, id uuid.UUID, change func(A) error) (A, error) {
	a, err := r.get(ctx, tx, id)
	if err != nil {
		return a, err
	}
	if err := change(a); err != nil {
		var zero A
		return zero, err
	}
	return a, r.save(ctx, tx, a)
}

// save writes a loaded aggregate back with its events.
func (r docRepo[A, S]) save(ctx context.Context, tx pgx.Tx, a A) error {
	snap := r.snapshot(a)
	loaded := *r.version(&snap)
	*r.version(&snap) = loaded + 1
	if err := saveVersioned(ctx, tx, r.table, "id", a.ID(), loaded, snap, r.columns(snap)); err != nil {
		return err
	}
	return writeEvents(ctx, tx, loaded+1, a.PopEvents())
}
