package postgres

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/domain"
)

// The writes of the transcript projection. Each is keyed by the raw event
// it comes from (its stream sequence, or an id derived from it), so a
// redelivered raw event writes nothing twice.

// TranscriptSource names the raw event a transcript row comes from.
type TranscriptSource struct {
	// Session is the session of the raw event.
	Session uuid.UUID
	// Seq is the raw event's stream sequence.
	Seq int64
	// At is when the raw event happened.
	At time.Time
}

// InsertAgentMessage records a message of the agent, or of a subagent when
// sub is set.
func InsertAgentMessage(ctx context.Context, db Execer, src TranscriptSource, id uuid.UUID, source domain.AgentMessageSource, sub *uuid.UUID, content, model string) error {
	_, err := db.Exec(ctx, `
		INSERT INTO agent_messages (id, session_id, source_seq, subagent_id, source, content, model_id, occurred_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT DO NOTHING`,
		id, src.Session, src.Seq, sub, string(source), content, model, src.At)
	return err
}

// InsertDeliveredMessage records the message messageID of the session's
// queue where the agent received it, with the content and source the
// queue holds, or its message history once it left the queue; a message
// neither holds adds nothing.
func InsertDeliveredMessage(ctx context.Context, db Execer, src TranscriptSource, id uuid.UUID, messageID string) error {
	var left *uuid.UUID // the id as message_history keys it, if it is one
	if u, err := uuid.Parse(messageID); err == nil {
		left = &u
	}
	_, err := db.Exec(ctx, `
		INSERT INTO agent_messages (id, session_id, source_seq, subagent_id, source, content, model_id, occurred_at)
		SELECT $1, $2, $3, NULL, m->>'source', m->>'content', '', $5
		  FROM (SELECT m FROM message_queues q, jsonb_array_elements(q.doc->'messages') m
		         WHERE q.session_id = $2 AND m->>'messageId' = $4
		        UNION ALL
		        SELECT h.doc FROM message_history h WHERE h.message_id = $6 AND h.session_id = $2) found (m)
		 LIMIT 1
		ON CONFLICT DO NOTHING`,
		id, src.Session, src.Seq, messageID, src.At, left)
	return err
}

// InsertToolCall records a Pending tool call, in its subagent when sub is
// set.
func InsertToolCall(ctx context.Context, db Execer, src TranscriptSource, id uuid.UUID, toolUseID string, sub *uuid.UUID, tool, input string) error {
	_, err := db.Exec(ctx, `
		INSERT INTO tool_calls (id, session_id, tool_use_id, source_seq, subagent_id, tool_name, input, status, started_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT DO NOTHING`,
		id, src.Session, toolUseID, src.Seq, sub, tool, input, string(domain.ToolCallPending), src.At)
	return err
}

// CompleteToolCall attaches a result to the session's call toolUseID,
// once.
func CompleteToolCall(ctx context.Context, db Execer, src TranscriptSource, toolUseID string, status domain.ToolCallStatus, result string, isError bool) error {
	_, err := db.Exec(ctx, `
		UPDATE tool_calls SET status = $3, result = $4, result_is_error = $5, result_seq = $6, completed_at = $7
		 WHERE session_id = $1 AND tool_use_id = $2 AND result_seq IS NULL`,
		src.Session, toolUseID, string(status), result, isError, src.Seq, src.At)
	return err
}

// EndSubagentsOfCall ends the running subagents the call toolUseID
// spawned, with status and, when they failed, reason.
func EndSubagentsOfCall(ctx context.Context, db Execer, src TranscriptSource, toolUseID string, status domain.SessionStatus, reason string) error {
	_, err := db.Exec(ctx, `
		UPDATE subagent_sessions SET status = $3, failure_reason = $4, completed_at = $5
		 WHERE session_id = $1 AND parent_tool_use_id = $2 AND status = $6`,
		src.Session, toolUseID, string(status), reason, src.At, string(domain.StatusRunning))
	return err
}

// CancelSubagents cancels the session's subagents still running.
func CancelSubagents(ctx context.Context, db Execer, src TranscriptSource) error {
	_, err := db.Exec(ctx, `
		UPDATE subagent_sessions SET status = $2, completed_at = $3
		 WHERE session_id = $1 AND status = $4`,
		src.Session, string(domain.StatusCancelled), src.At, string(domain.StatusRunning))
	return err
}

// Subagent is what one event of a subagent tells of it.
type Subagent struct {
	// ID is the subagent's id in agentbus.
	ID uuid.UUID
	// EngineID is the engine's id of the subagent.
	EngineID string
	// Type, ParentToolUseID and Model are empty when the event lacks them.
	Type, ParentToolUseID, Model string
}

// UpsertSubagent records a subagent when one of its events is first seen,
// Running, with the objective of the Task call that spawned it; later
// events fill in what the first one lacked.
func UpsertSubagent(ctx context.Context, db Execer, src TranscriptSource, s Subagent) error {
	_, err := db.Exec(ctx, `
		INSERT INTO subagent_sessions (session_id, id, engine_subagent_id, subagent_type, parent_tool_use_id, model_id,
		                               objective, status, source_seq, started_at)
		VALUES ($1, $2, $3, $4, $5, $6,
		        COALESCE((SELECT COALESCE(NULLIF(input::jsonb ->> 'prompt', ''), input::jsonb ->> 'description', '')
		                    FROM tool_calls WHERE session_id = $1 AND tool_use_id = $5 AND $5 <> ''), ''),
		        $7, $8, $9)
		ON CONFLICT (session_id, id) DO UPDATE SET
		    subagent_type = CASE WHEN subagent_sessions.subagent_type = '' THEN EXCLUDED.subagent_type ELSE subagent_sessions.subagent_type END,
		    model_id = CASE WHEN subagent_sessions.model_id = '' THEN EXCLUDED.model_id ELSE subagent_sessions.model_id END,
		    parent_tool_use_id = CASE WHEN subagent_sessions.parent_tool_use_id = '' THEN EXCLUDED.parent_tool_use_id ELSE subagent_sessions.parent_tool_use_id END,
		    objective = CASE WHEN subagent_sessions.objective = '' THEN EXCLUDED.objective ELSE subagent_sessions.objective END
		WHERE (subagent_sessions.subagent_type = '' AND EXCLUDED.subagent_type <> '')
		   OR (subagent_sessions.model_id = '' AND EXCLUDED.model_id <> '')
		   OR (subagent_sessions.parent_tool_use_id = '' AND EXCLUDED.parent_tool_use_id <> '')
		   OR (subagent_sessions.objective = '' AND EXCLUDED.objective <> '')`,
		src.Session, s.ID, s.EngineID, s.Type, s.ParentToolUseID, s.Model, string(domain.StatusRunning), src.Seq, src.At)
	return err
}

// InsertOutputChunk appends a chunk of kind to the session's log, keyed by
// the raw event it comes from.
func InsertOutputChunk(ctx context.Context, db Execer, src TranscriptSource, id uuid.UUID, kind, content string) error {
	_, err := db.Exec(ctx, `
		INSERT INTO session_log_chunks (id, session_id, kind, content, source_seq, recorded_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT DO NOTHING`,
		id, src.Session, kind, content, src.Seq, src.At)
	return err
}
