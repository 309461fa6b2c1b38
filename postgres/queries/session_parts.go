package queries

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/domain"
)

// part reads one member of the owner's session document into T; a member
// that is absent or null leaves T at its zero value.
func part[T any](ctx context.Context, db DB, owner, id uuid.UUID, member string) (T, error) {
	var (
		out T
		raw []byte
	)
	err := db.QueryRow(ctx, "SELECT doc -> $3::text FROM sessions WHERE id = $1 AND owner_id = $2", id, owner, member).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return out, &NotFoundError{Entity: "session", ID: id.String()}
	}
	if err != nil {
		return out, fmt.Errorf("queries: session %s %s: %w", id, member, err)
	}
	if len(raw) == 0 || string(raw) == "null" {
		return out, nil
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, fmt.Errorf("queries: session %s %s unreadable: %w", id, member, err)
	}
	return out, nil
}

// TaskList returns the agent's latest task list (GetSessionTaskListQuery);
// nil when the agent has not written one.
func (s *Store) TaskList(ctx context.Context, owner, id uuid.UUID) (*domain.SessionTaskList, error) {
	return part[*domain.SessionTaskList](ctx, s.db, owner, id, "taskList")
}

// Plan returns the session's plan document (GetSessionPlanQuery); nil when
// the agent has not entered plan mode.
func (s *Store) Plan(ctx context.Context, owner, id uuid.UUID) (*domain.SessionPlan, error) {
	return part[*domain.SessionPlan](ctx, s.db, owner, id, "plan")
}

// Metrics returns the session's full metrics (GetSessionMetricsQuery).
func (s *Store) Metrics(ctx context.Context, owner, id uuid.UUID) (domain.SessionMetrics, error) {
	return part[domain.SessionMetrics](ctx, s.db, owner, id, "metrics")
}

// PendingPermissions returns the tool permission requests that wait for
// the owner's decision: none, or the one the session waits on.
func (s *Store) PendingPermissions(ctx context.Context, owner, id uuid.UUID) ([]domain.PermissionRequest, error) {
	req, err := part[*domain.PermissionRequest](ctx, s.db, owner, id, "pendingPermission")
	if err != nil || req == nil {
		return []domain.PermissionRequest{}, err
	}
	return []domain.PermissionRequest{*req}, nil
}
