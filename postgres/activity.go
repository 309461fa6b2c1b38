package postgres

import (
	"context"

	"github.com/agentbus/agentbus/domain"
	"github.com/google/uuid"
)

// InsertActivityItem records an activity item under the raw event's stream
// sequence seq; an item already recorded for seq is left as it is, so a
// redelivered raw event adds nothing.
func InsertActivityItem(ctx context.Context, db Execer, item domain.ActivityItem, seq uint64, rawType, toolUseID string) error {
	var sub *string
	if item.SubAgentID != nil {
		s := item.SubAgentID.String()
		sub = &s
	}
	_, err := db.Exec(ctx, `
		INSERT INTO activity_items (id, session_id, source_seq, raw_type, type, summary, detail, tool_name, subagent_id, occurred_at, tool_use_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, NULLIF($11, ''))
		ON CONFLICT (source_seq) DO NOTHING`,
		item.ID, item.SessionID, int64(seq), rawType, string(item.Type), item.Summary, item.Detail, item.ToolName, sub, item.Timestamp, toolUseID)
	return err
}

// InsertLogChunk appends a chunk of kind to the session's log under id; a
// chunk already recorded under id is left as it is.
func InsertLogChunk(ctx context.Context, db Execer, id, sessionID uuid.UUID, kind string, chunk domain.SessionLogChunk) error {
	_, err := db.Exec(ctx, `
		INSERT INTO session_log_chunks (id, session_id, kind, content, recorded_at)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (id) DO NOTHING`, id, sessionID, kind, chunk.Content, chunk.RecordedAt)
	return err
}
