package postgres

import (
	"context"
	"time"

	"github.com/agentbus/agentbus/domain"
	"github.com/google/uuid"
)

// ActivityRow is an activity item with the raw event it was recorded from.
type ActivityRow struct {
	Item domain.ActivityItem
	// Seq is the raw event's stream sequence, the row's key.
	Seq       uint64
	RawType   string
	ToolUseID string
}

// InsertActivityItem records an activity item under the raw event's stream
// sequence seq; an item already recorded for seq is left as it is, so a
// redelivered raw event adds nothing.
func InsertActivityItem(ctx context.Context, db Execer, item domain.ActivityItem, seq uint64, rawType, toolUseID string) error {
	return InsertActivityItems(ctx, db, []ActivityRow{{Item: item, Seq: seq, RawType: rawType, ToolUseID: toolUseID}})
}

// InsertActivityItems records rows in one statement, so they commit
// together with one write to the log; rows already recorded for their
// sequence are left as they are.
func InsertActivityItems(ctx context.Context, db Execer, rows []ActivityRow) error {
	if len(rows) == 0 {
		return nil
	}
	var (
		ids, sessions                                  = make([]uuid.UUID, len(rows)), make([]uuid.UUID, len(rows))
		seqs                                           = make([]int64, len(rows))
		rawTypes, types, summaries, details, toolNames = make([]string, len(rows)), make([]string, len(rows)), make([]string, len(rows)), make([]string, len(rows)), make([]string, len(rows))
		subagents                                      = make([]*string, len(rows))
		toolUseIDs                                     = make([]string, len(rows))
		at                                             = make([]time.Time, len(rows))
	)
	for i, r := range rows {
		ids[i], sessions[i], seqs[i] = r.Item.ID, r.Item.SessionID, int64(r.Seq)
		rawTypes[i], types[i], summaries[i], details[i], toolNames[i] = r.RawType, string(r.Item.Type), r.Item.Summary, r.Item.Detail, r.Item.ToolName
		if r.Item.SubAgentID != nil {
			s := r.Item.SubAgentID.String()
			subagents[i] = &s
		}
		toolUseIDs[i], at[i] = r.ToolUseID, r.Item.Timestamp
	}
	_, err := db.Exec(ctx, `
		INSERT INTO activity_items (id, session_id, source_seq, raw_type, type, summary, detail, tool_name, subagent_id, occurred_at, tool_use_id)
		SELECT id, session_id, source_seq, raw_type, type, summary, detail, tool_name, subagent_id, occurred_at, NULLIF(tool_use_id, '')
		FROM unnest($1::uuid[], $2::uuid[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::timestamptz[], $11::text[])
			AS r(id, session_id, source_seq, raw_type, type, summary, detail, tool_name, subagent_id, occurred_at, tool_use_id)
		ON CONFLICT (source_seq) DO NOTHING`,
		ids, sessions, seqs, rawTypes, types, summaries, details, toolNames, subagents, at, toolUseIDs)
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
