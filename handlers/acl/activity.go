package acl

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentbus/agentbus/domain"
)

// recordActivity appends one activity item, keyed by the raw event's
// stream sequence, so a redelivered raw event adds nothing. It returns the
// item as recorded, for the live feed.
func recordActivity(ctx context.Context, pool *pgxpool.Pool, seq uint64, rawType, toolUseID string, a domain.ActivityItem) (domain.ActivityItem, error) {
	if a.Type == domain.ActivityToolCallEnd && a.ToolName == "" && toolUseID != "" {
		// The result names only its call: the call's item has the tool.
		err := pool.QueryRow(ctx, "SELECT tool_name FROM activity_items WHERE session_id = $1 AND tool_use_id = $2 AND tool_name <> '' LIMIT 1",
			a.SessionID, toolUseID).Scan(&a.ToolName)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			// Only "no such call" may record the result without its tool:
			// a failed read is retried, not acked with a wrong item.
			return a, fmt.Errorf("acl: tool of call %s: %w", toolUseID, err)
		}
	}
	a.ID = uuid.NewSHA1(commandNamespace, []byte(a.SessionID.String()+"/activity/"+rawType+"/"+strconv.FormatUint(seq, 10)))
	if a.Summary == "" {
		a.Summary = rawType
	}
	item, err := domain.NewActivityItem(a)
	if err != nil {
		// An item the model refuses (a result whose call was never seen)
		// is still recorded, as an unknown event under its raw type.
		a.Type, a.Summary, a.ToolName = domain.ActivityUnknownEvent, rawType, ""
		if item, err = domain.NewActivityItem(a); err != nil {
			return item, err
		}
	}
	var sub *string
	if item.SubAgentID != nil {
		s := item.SubAgentID.String()
		sub = &s
	}
	_, err = pool.Exec(ctx, `
		INSERT INTO activity_items (id, session_id, source_seq, raw_type, type, summary, detail, tool_name, subagent_id, occurred_at, tool_use_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, NULLIF($11, ''))
		ON CONFLICT (source_seq) DO NOTHING`,
		item.ID, item.SessionID, int64(seq), rawType, string(item.Type), item.Summary, item.Detail, item.ToolName, sub, item.Timestamp, toolUseID)
	return item, err
}
