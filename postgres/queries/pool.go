package queries

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/domain"
)

// PoolUtilization returns how many of the owner's pool slots are taken
// (GetSessionPoolUtilizationQuery): the sessions that hold a slot (those
// with a live sidecar: neither Queued nor ended) against the size the
// owner set, or the Store's pool size when they set none.
func (s *Store) PoolUtilization(ctx context.Context, owner uuid.UUID) (domain.SessionPoolUtilization, error) {
	statuses := make([]string, 0, 12)
	for _, st := range domain.PoolSlotStatuses() {
		statuses = append(statuses, string(st))
	}
	var active int
	var size *int
	err := s.db.QueryRow(ctx, `SELECT (SELECT count(*) FROM sessions WHERE owner_id = $1 AND status = ANY($2)),
		(SELECT max_concurrent_sessions FROM pool_configs WHERE owner_id = $1)`, owner, statuses).Scan(&active, &size)
	if err != nil {
		return domain.SessionPoolUtilization{}, fmt.Errorf("queries: pool utilization: %w", err)
	}
	pool := s.pool
	if size != nil {
		if pool, err = domain.NewSessionPool(domain.SessionPoolConfig{MaxConcurrentSessions: *size}); err != nil {
			return domain.SessionPoolUtilization{}, fmt.Errorf("queries: pool utilization: %w", err)
		}
	}
	return pool.Utilization(active), nil
}
