package queries

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/domain"
)

// PoolUtilization returns how many of the owner's pool slots are taken
// (GetSessionPoolUtilizationQuery): the sessions that hold a slot (those
// with a live sidecar: neither Queued nor ended) against the pool's size.
func (s *Store) PoolUtilization(ctx context.Context, owner uuid.UUID) (domain.SessionPoolUtilization, error) {
	statuses := make([]string, 0, 12)
	for _, st := range domain.PoolSlotStatuses() {
		statuses = append(statuses, string(st))
	}
	var active int
	err := s.db.QueryRow(ctx, "SELECT count(*) FROM sessions WHERE owner_id = $1 AND status = ANY($2)", owner, statuses).
		Scan(&active)
	if err != nil {
		return domain.SessionPoolUtilization{}, fmt.Errorf("queries: pool utilization: %w", err)
	}
	return s.pool.Utilization(active), nil
}
