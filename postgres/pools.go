package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/domain"
)

// Pools is the storage side of each owner's session pool, used inside a
// command's transaction: the lock that serialises an owner's allocations,
// the counts and line of sessions they are decided on, and the size the
// owner set.
type Pools struct{}

// Lock takes the owner's pool lock until the transaction ends. Every
// allocation and release of the owner's sessions takes it first, so the
// counts read after it stay true until commit and two allocations never
// both take the last slot or start the same Queued session.
func (Pools) Lock(ctx context.Context, tx pgx.Tx, owner uuid.UUID) error {
	_, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", "pool:"+owner.String())
	return err
}

// Active counts the owner's sessions that hold a pool slot.
func (Pools) Active(ctx context.Context, q Querier, owner uuid.UUID) (int, error) {
	var n int
	err := q.QueryRow(ctx, "SELECT count(*) FROM sessions WHERE owner_id = $1 AND status = ANY($2)",
		owner, slotStatuses()).Scan(&n)
	return n, err
}

// Queued returns the owner's Queued sessions in the order they get a slot:
// oldest first, at most limit of them.
func (Pools) Queued(ctx context.Context, tx pgx.Tx, owner uuid.UUID, limit int) ([]uuid.UUID, error) {
	rows, err := tx.Query(ctx, "SELECT id FROM sessions WHERE owner_id = $1 AND status = $2 ORDER BY created_at, id LIMIT $3",
		owner, string(domain.StatusQueued), limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
}

// Config returns the size the owner set for their pool; its zero value
// when they set none.
func (Pools) Config(ctx context.Context, q Querier, owner uuid.UUID) (domain.SessionPoolConfig, error) {
	var cfg domain.SessionPoolConfig
	err := q.QueryRow(ctx, "SELECT max_concurrent_sessions FROM pool_configs WHERE owner_id = $1", owner).
		Scan(&cfg.MaxConcurrentSessions)
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.SessionPoolConfig{}, nil
	}
	return cfg, err
}

// SetConfig stores the size the owner set for their pool.
func (Pools) SetConfig(ctx context.Context, tx pgx.Tx, owner uuid.UUID, cfg domain.SessionPoolConfig, at time.Time) error {
	_, err := tx.Exec(ctx, `INSERT INTO pool_configs (owner_id, max_concurrent_sessions, updated_at) VALUES ($1, $2, $3)
		ON CONFLICT (owner_id) DO UPDATE SET max_concurrent_sessions = EXCLUDED.max_concurrent_sessions, updated_at = EXCLUDED.updated_at`,
		owner, cfg.MaxConcurrentSessions, at)
	return err
}

func slotStatuses() []string {
	statuses := make([]string, 0, 8)
	for _, s := range domain.PoolSlotStatuses() {
		statuses = append(statuses, string(s))
	}
	return statuses
}
