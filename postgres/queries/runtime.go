package queries

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/domain"
)

// SessionStatuses returns the status of each of the sessions that exists,
// for the runtime that keeps their sidecars. It is a worker's question,
// not an owner's: it is not scoped.
func SessionStatuses(ctx context.Context, db DB, ids []uuid.UUID) (map[uuid.UUID]domain.SessionStatus, error) {
	out := make(map[uuid.UUID]domain.SessionStatus, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := db.Query(ctx, "SELECT id, status FROM sessions WHERE id = ANY($1)", ids)
	if err != nil {
		return nil, fmt.Errorf("queries: session statuses: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id uuid.UUID
		var status string
		if err := rows.Scan(&id, &status); err != nil {
			return nil, fmt.Errorf("queries: session statuses: %w", err)
		}
		out[id] = domain.SessionStatus(status)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queries: session statuses: %w", err)
	}
	return out, nil
}
