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

// InsertToolCall records a tool call, in its subagent when sub is set:
// Pending, or with its result when that was projected first. The Task
// call that spawned a subagent seen before it gives that subagent its
// objective. Of two calls with one tool_use_id, the earlier in the stream
// is kept, whichever came first.
func InsertToolCall(ctx context.Context, db Execer, src TranscriptSource, id uuid.UUID, toolUseID string, sub *uuid.UUID, tool, input string) error {
	_, err := db.Exec(ctx, `
		INSERT INTO tool_calls (id, session_id, tool_use_id, source_seq, subagent_id, tool_name, input, status,
		                        result, result_is_error, result_seq, started_at, completed_at)
		SELECT $1::uuid, $2::uuid, $3::text, $4::bigint, $5::uuid, $6::text, $7::text, COALESCE(r.status, $8::text),
		       r.result, r.is_error, r.source_seq, $9::timestamptz, r.completed_at
		  FROM (SELECT 1) one
		  LEFT JOIN tool_results r ON r.session_id = $2 AND r.tool_use_id = $3
		ON CONFLICT (session_id, tool_use_id) DO UPDATE SET
		    source_seq = EXCLUDED.source_seq, subagent_id = EXCLUDED.subagent_id, tool_name = EXCLUDED.tool_name,
		    input = EXCLUDED.input, started_at = EXCLUDED.started_at
		WHERE EXCLUDED.source_seq < tool_calls.source_seq`,
		id, src.Session, toolUseID, src.Seq, sub, tool, input, string(domain.ToolCallPending), src.At)
	if err != nil {
		return err
	}
	_, err = db.Exec(ctx, `
		UPDATE subagent_sessions SET objective = `+objectiveOf("$3")+`
		 WHERE session_id = $1 AND parent_tool_use_id = $2 AND objective = ''`,
		src.Session, toolUseID, input)
	return err
}

// objectiveOf is the SQL of a subagent's objective from the input of the
// Task call that spawned it: its prompt, else its description.
func objectiveOf(input string) string {
	return `COALESCE(NULLIF(` + input + `::jsonb ->> 'prompt', ''), ` + input + `::jsonb ->> 'description', '')`
}

// CompleteToolCall attaches a result to the session's call toolUseID, or
// keeps it for the call when the call is not recorded yet. A call keeps
// the earliest result in the stream, whichever came first.
func CompleteToolCall(ctx context.Context, db Execer, src TranscriptSource, toolUseID string, status domain.ToolCallStatus, result string, isError bool) error {
	_, err := db.Exec(ctx, `
		INSERT INTO tool_results (session_id, tool_use_id, source_seq, status, result, is_error, completed_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (session_id, tool_use_id) DO UPDATE SET
		    source_seq = EXCLUDED.source_seq, status = EXCLUDED.status, result = EXCLUDED.result,
		    is_error = EXCLUDED.is_error, completed_at = EXCLUDED.completed_at
		WHERE EXCLUDED.source_seq < tool_results.source_seq`,
		src.Session, toolUseID, src.Seq, string(status), result, isError, src.At)
	if err != nil {
		return err
	}
	_, err = db.Exec(ctx, `
		UPDATE tool_calls SET status = $3, result = $4, result_is_error = $5, result_seq = $6, completed_at = $7
		 WHERE session_id = $1 AND tool_use_id = $2 AND (result_seq IS NULL OR result_seq > $6)`,
		src.Session, toolUseID, string(status), result, isError, src.Seq, src.At)
	return err
}

// EndSubagentsOfCall ends the subagents the call toolUseID spawned, with
// status and, when they failed, reason. The call's result decides, even
// over the session's end projected before it: in the stream, the result
// comes first.
func EndSubagentsOfCall(ctx context.Context, db Execer, src TranscriptSource, toolUseID string, status domain.SessionStatus, reason string) error {
	_, err := db.Exec(ctx, `
		UPDATE subagent_sessions SET status = $3, failure_reason = $4, completed_at = $5
		 WHERE session_id = $1 AND parent_tool_use_id = $2 AND status IN ($6, $7)`,
		src.Session, toolUseID, string(status), reason, src.At, string(domain.StatusRunning), string(domain.StatusCancelled))
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

// UpsertSubagent records a subagent when one of its events is seen:
// Running, or ended when the result of the call that spawned it was
// projected first, with the objective of that call. Its first event in
// the stream gives its start, whichever came first; later events fill in
// what the first one lacked.
func UpsertSubagent(ctx context.Context, db Execer, src TranscriptSource, s Subagent) error {
	_, err := db.Exec(ctx, `
		INSERT INTO subagent_sessions (session_id, id, engine_subagent_id, subagent_type, parent_tool_use_id, model_id,
		                               objective, status, failure_reason, source_seq, started_at, completed_at)
		SELECT $1::uuid, $2::uuid, $3::text, $4::text, $5::text, $6::text,
		       COALESCE((SELECT `+objectiveOf("input")+`
		                   FROM tool_calls WHERE session_id = $1 AND tool_use_id = $5 AND $5 <> ''), ''),
		       CASE WHEN r.source_seq IS NULL THEN $7::text WHEN r.is_error THEN $10::text ELSE $11::text END,
		       CASE WHEN r.is_error THEN $12::text ELSE '' END,
		       $8::bigint, $9::timestamptz, r.completed_at
		  FROM (SELECT 1) one
		  LEFT JOIN tool_results r ON r.session_id = $1 AND r.tool_use_id = $5 AND $5 <> ''
		ON CONFLICT (session_id, id) DO UPDATE SET
		    subagent_type = CASE WHEN subagent_sessions.subagent_type = '' THEN EXCLUDED.subagent_type ELSE subagent_sessions.subagent_type END,
		    model_id = CASE WHEN subagent_sessions.model_id = '' THEN EXCLUDED.model_id ELSE subagent_sessions.model_id END,
		    parent_tool_use_id = CASE WHEN subagent_sessions.parent_tool_use_id = '' THEN EXCLUDED.parent_tool_use_id ELSE subagent_sessions.parent_tool_use_id END,
		    objective = CASE WHEN subagent_sessions.objective = '' THEN EXCLUDED.objective ELSE subagent_sessions.objective END,
		    source_seq = LEAST(subagent_sessions.source_seq, EXCLUDED.source_seq),
		    started_at = CASE WHEN EXCLUDED.source_seq < subagent_sessions.source_seq THEN EXCLUDED.started_at ELSE subagent_sessions.started_at END
		WHERE (subagent_sessions.subagent_type = '' AND EXCLUDED.subagent_type <> '')
		   OR (subagent_sessions.model_id = '' AND EXCLUDED.model_id <> '')
		   OR (subagent_sessions.parent_tool_use_id = '' AND EXCLUDED.parent_tool_use_id <> '')
		   OR (subagent_sessions.objective = '' AND EXCLUDED.objective <> '')
		   OR EXCLUDED.source_seq < subagent_sessions.source_seq`,
		src.Session, s.ID, s.EngineID, s.Type, s.ParentToolUseID, s.Model, string(domain.StatusRunning), src.Seq, src.At,
		string(domain.StatusFailed), string(domain.StatusCompleted), string(domain.FailureAgentError))
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
