package queries

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/domain"
)

// The reads of the workers. They act for the system, not for a person, so
// unlike Store's queries they are not scoped to an owner.

// LastAgentText returns the session's last message of its own agent (not
// of a subagent), from the transcript; ErrNotFound when it has none.
func LastAgentText(ctx context.Context, db DB, sessionID uuid.UUID) (string, error) {
	var text string
	err := db.QueryRow(ctx, `
		SELECT content FROM agent_messages
		WHERE session_id = $1 AND subagent_id IS NULL AND source = $2
		ORDER BY source_seq DESC LIMIT 1`, sessionID, string(domain.SourceAgent)).Scan(&text)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNotFound
	}
	return text, err
}

// OwnerOf returns the owner of a session or a chain (aggregate is
// domain.AggregateSession or domain.AggregateChain); ErrNotFound when it
// does not exist.
func OwnerOf(ctx context.Context, db DB, aggregate string, id uuid.UUID) (uuid.UUID, error) {
	var query string
	switch aggregate {
	case domain.AggregateSession:
		query = "SELECT owner_id FROM sessions WHERE id = $1"
	case domain.AggregateChain:
		query = "SELECT owner_id FROM chains WHERE id = $1"
	default:
		return uuid.Nil, fmt.Errorf("the owner of a %s is not recorded", aggregate)
	}
	var owner uuid.UUID
	err := db.QueryRow(ctx, query, id).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return uuid.Nil, ErrNotFound
	}
	return owner, err
}

// dueSessions finds the sessions in one of the statuses $1 whose wait may
// have expired by $2. The deadline is read from the stored document only
// to pick candidates through the status index; the session itself
// decides (NextDeadline and ExpireTimeouts), so a mistake here costs a
// load, never a wrong expiry.
const dueSessions = `
SELECT id FROM sessions
WHERE status = ANY($1) AND CASE status
	WHEN 'WaitingForInput' THEN (doc->'pendingQuestion'->>'expiresAt')::timestamptz
	WHEN 'WaitingForApproval' THEN (doc->'pendingPermission'->>'expiresAt')::timestamptz
	WHEN 'Paused' THEN (doc->>'pausedAt')::timestamptz + (doc->'timeouts'->>'pause')::bigint / 1000 * interval '1 microsecond'
END <= $2`

// DueSessions returns the sessions in one of statuses whose wait may have
// expired by at.
func DueSessions(ctx context.Context, db DB, statuses []string, at time.Time) ([]uuid.UUID, error) {
	rows, err := db.Query(ctx, dueSessions, statuses, at)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
}

// ToolOfCall returns the tool of the session's tool call toolUseID, from
// the activity item of its start; ErrNotFound when no item names it.
func ToolOfCall(ctx context.Context, db DB, sessionID uuid.UUID, toolUseID string) (string, error) {
	var tool string
	err := db.QueryRow(ctx, "SELECT tool_name FROM activity_items WHERE session_id = $1 AND tool_use_id = $2 AND tool_name <> '' LIMIT 1",
		sessionID, toolUseID).Scan(&tool)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNotFound
	}
	return tool, err
}
