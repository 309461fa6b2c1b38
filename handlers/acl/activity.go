package acl

import (
	"context"
	"strconv"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentbus/agentbus/domain"
)

// recordActivity appends one activity item, keyed by the raw event's
// stream sequence, so a redelivered raw event adds nothing.
func recordActivity(ctx context.Context, pool *pgxpool.Pool, seq uint64, rawType string, a domain.ActivityItem) error {
	a.ID = uuid.NewSHA1(commandNamespace, []byte(a.SessionID.String()+"/activity/"+rawType+"/"+strconv.FormatUint(seq, 10)))
	if a.Summary == "" {
		a.Summary = rawType
	}
	item, err := domain.NewActivityItem(a)
	if err != nil {
		// The summary rules cannot fail the raw event: fall back to the
		// bare type, which always fits.
		a.Summary = rawType
		if item, err = domain.NewActivityItem(a); err != nil {
			return err
		}
	}
	var sub *string
	if item.SubAgentID != nil {
		s := item.SubAgentID.String()
		sub = &s
	}
	_, err = pool.Exec(ctx, `
		INSERT INTO activity_items (id, session_id, source_seq, raw_type, type, summary, detail, tool_name, subagent_id, occurred_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (source_seq) DO NOTHING`,
		item.ID, item.SessionID, int64(seq), rawType, string(item.Type), item.Summary, item.Detail, item.ToolName, sub, item.Timestamp)
	return err
}
