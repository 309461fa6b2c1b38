package queries

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/domain"
)

// OutboxBacklog returns how many events wait in the outbox for the outbox
// publisher, and the age of the oldest (0 when none waits).
func (s *Store) OutboxBacklog(ctx context.Context) (int64, time.Duration, error) {
	var n int64
	var age float64
	err := s.db.QueryRow(ctx, `SELECT count(*), coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 FROM outbox`).
		Scan(&n, &age)
	if err != nil {
		return 0, 0, fmt.Errorf("queries: outbox backlog: %w", err)
	}
	return n, time.Duration(age * float64(time.Second)), nil
}

// PoolSlotsInUse returns, for each owner holding at least one pool slot,
// how many they hold and their pool's size.
func (s *Store) PoolSlotsInUse(ctx context.Context) (map[uuid.UUID][2]int, error) {
	statuses := make([]string, 0, 12)
	for _, st := range domain.PoolSlotStatuses() {
		statuses = append(statuses, string(st))
	}
	rows, err := s.db.Query(ctx, `SELECT s.owner_id, count(*), p.max_concurrent_sessions
		FROM sessions s LEFT JOIN pool_configs p ON p.owner_id = s.owner_id
		WHERE s.status = ANY($1) GROUP BY s.owner_id, p.max_concurrent_sessions`, statuses)
	if err != nil {
		return nil, fmt.Errorf("queries: pool slots in use: %w", err)
	}
	defer rows.Close()
	out := map[uuid.UUID][2]int{}
	for rows.Next() {
		var owner uuid.UUID
		var used int
		var size *int
		if err := rows.Scan(&owner, &used, &size); err != nil {
			return nil, fmt.Errorf("queries: pool slots in use: %w", err)
		}
		max := s.pool.MaxCount()
		if size != nil {
			max = *size
		}
		out[owner] = [2]int{used, max}
	}
	return out, rows.Err()
}
