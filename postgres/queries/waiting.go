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

// RunningTool is a tool call of a session's own agent that started and
// has no result yet.
type RunningTool struct {
	ToolUseID string
	ToolName  string
	// Input is the call's input, as JSON.
	Input     string
	StartedAt time.Time
}

// RunningTool returns the session's latest tool call when it has no
// result yet, from its recorded activity, or nil. Only the latest call
// counts: an earlier one a crashed sidecar never finished is not running.
// A subagent's calls are not the session's: they never hold it up.
func (s *Store) RunningTool(ctx context.Context, session uuid.UUID) (*RunningTool, error) {
	var t RunningTool
	err := s.db.QueryRow(ctx, `
SELECT c.tool_use_id, c.tool_name, c.detail, c.occurred_at
  FROM (SELECT tool_name, detail, occurred_at, tool_use_id, session_id
          FROM activity_items
         WHERE session_id = $1 AND type = $2 AND subagent_id IS NULL AND tool_use_id IS NOT NULL
         ORDER BY source_seq DESC
         LIMIT 1) c
 WHERE NOT EXISTS (SELECT 1 FROM activity_items e
                    WHERE e.session_id = c.session_id AND e.tool_use_id = c.tool_use_id AND e.type = $3)`, session, string(domain.ActivityToolCallStart), string(domain.ActivityToolCallEnd)).Scan(&t.ToolUseID, &t.ToolName, &t.Input, &t.StartedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("queries: running tool of %s: %w", session, err)
	}
	return &t, nil
}
