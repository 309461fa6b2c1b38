package projections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// write is one statement of a raw event's projection; a raw event's
// writes commit together.
type write func(ctx context.Context, tx pgx.Tx) error

// Log chunk kinds.
const (
	// LogOutput is a chunk of the agent's output, projected from a raw event.
	LogOutput = "output"
	// LogDecision is a decision the agent logged through the agent API.
	LogDecision = "decision"
)

var errUnreadable = errors.New("unreadable raw event")

// decode reads a raw event's data into T.
func decode[T any](ev event) (T, error) {
	var v T
	if err := json.Unmarshal(ev.data, &v); err != nil {
		return v, fmt.Errorf("%w: %s: %v", errUnreadable, ev.typ, err)
	}
	return v, nil
}

// project returns the writes of one raw event: none for the types that add
// nothing to the transcript (acks, usage, lifecycle signals).
func project(ev event) ([]write, error) {
	switch ev.typ {
	case protocol.EventAssistantMessage:
		d, err := decode[protocol.AssistantMessage](ev)
		if err != nil {
			return nil, err
		}
		if d.BlockType == protocol.BlockToolUse {
			return toolUse(ev, d)
		}
		return text(ev, d.Text, d.SubagentID, d.ParentToolUseID, "", d.Model), nil
	case protocol.EventSubagentMessage:
		d, err := decode[protocol.SubagentMessage](ev)
		if err != nil {
			return nil, err
		}
		if d.SubagentID == "" {
			return nil, fmt.Errorf("%w: subagent_message without subagent_id", errUnreadable)
		}
		return text(ev, d.Text, d.SubagentID, d.ParentToolUseID, d.SubagentType, d.Model), nil
	case protocol.EventToolResult:
		d, err := decode[protocol.ToolResult](ev)
		if err != nil {
			return nil, err
		}
		return toolResult(ev, d)
	case protocol.EventSessionEnd:
		d, err := decode[protocol.SessionEnd](ev)
		if err != nil {
			return nil, err
		}
		line := "[end] " + d.Status + ": " + d.Reason
		if d.Error != "" {
			line += " (" + d.Error + ")"
		}
		return []write{logChunk(ev, line), endSubagents(ev)}, nil
	case protocol.EventMessageDelivered:
		d, err := decode[protocol.MessageDelivered](ev)
		if err != nil {
			return nil, err
		}
		return []write{delivered(ev, d.MessageID)}, nil
	}
	return nil, nil
}

// endSubagents cancels the subagents still running when their session
// ends: they end with it, whatever they were doing.
func endSubagents(ev event) write {
	return func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
			UPDATE subagent_sessions SET status = $2, completed_at = $3
			 WHERE session_id = $1 AND status = $4`,
			ev.session, string(domain.StatusCancelled), ev.at, string(domain.StatusRunning))
		return err
	}
}

// delivered records a message of a person, the system or a webhook in the
// transcript where the agent received it. The raw event names the message
// only; its content and source are in the session's queue, where the
// message stays once delivered. A message the queue does not hold adds
// nothing.
func delivered(ev event, messageID string) write {
	return func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
			INSERT INTO agent_messages (id, session_id, source_seq, subagent_id, source, content, model_id, occurred_at)
			SELECT $1, $2, $3, NULL, m->>'source', m->>'content', '', $5
			  FROM message_queues q, jsonb_array_elements(q.doc->'messages') m
			 WHERE q.session_id = $2 AND m->>'messageId' = $4
			ON CONFLICT DO NOTHING`,
			ev.id("message"), ev.session, ev.seq, messageID, ev.at)
		return err
	}
}

// text records a text block: the agent's message and output, or a
// subagent's message (which stays out of the parent's list and log).
func text(ev event, content, subagentID, parentToolUseID, subagentType, model string) []write {
	if content == "" {
		return nil
	}
	if subagentID == "" {
		return []write{message(ev, domain.SourceAgent, nil, content, model), logChunk(ev, content)}
	}
	sub := subagentUUID(subagentID)
	return []write{
		spawn(ev, sub, subagentID, parentToolUseID, subagentType, model),
		message(ev, domain.SourceSubAgent, &sub, content, model),
	}
}

func message(ev event, source domain.AgentMessageSource, sub *uuid.UUID, content, model string) write {
	return func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
			INSERT INTO agent_messages (id, session_id, source_seq, subagent_id, source, content, model_id, occurred_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT DO NOTHING`,
			ev.id("message"), ev.session, ev.seq, sub, string(source), content, model, ev.at)
		return err
	}
}

// toolUse records a Pending tool call, in its subagent when a subagent
// made it.
func toolUse(ev event, d protocol.AssistantMessage) ([]write, error) {
	if d.ToolUseID == "" || d.ToolName == "" {
		return nil, fmt.Errorf("%w: tool_use without tool_use_id or tool_name", errUnreadable)
	}
	input := string(d.Input)
	if len(d.Input) == 0 || !json.Valid(d.Input) {
		input = "{}"
	}
	var writes []write
	var sub *uuid.UUID
	if d.SubagentID != "" {
		id := subagentUUID(d.SubagentID)
		sub = &id
		writes = append(writes, spawn(ev, id, d.SubagentID, d.ParentToolUseID, "", d.Model))
	}
	writes = append(writes, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
			INSERT INTO tool_calls (id, session_id, tool_use_id, source_seq, subagent_id, tool_name, input, status, started_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT DO NOTHING`,
			toolCallID(ev.session, d.ToolUseID), ev.session, d.ToolUseID, ev.seq, sub, d.ToolName, input,
			string(domain.ToolCallPending), ev.at)
		return err
	})
	if sub == nil {
		writes = append(writes, logChunk(ev, "[tool] "+d.ToolName+" "+input))
	}
	return writes, nil
}

// toolResult attaches a result to its call, once, and ends the subagents
// the call spawned. A result whose call was never seen attaches to nothing.
func toolResult(ev event, d protocol.ToolResult) ([]write, error) {
	if d.ToolUseID == "" {
		return nil, fmt.Errorf("%w: tool_result without tool_use_id", errUnreadable)
	}
	status, subStatus, reason, prefix := domain.ToolCallSuccess, domain.StatusCompleted, "", "[result] "
	if d.IsError {
		status, subStatus, reason, prefix = domain.ToolCallError, domain.StatusFailed, string(domain.FailureAgentError), "[error] "
	}
	writes := []write{
		func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `
				UPDATE tool_calls SET status = $3, result = $4, result_is_error = $5, result_seq = $6, completed_at = $7
				 WHERE session_id = $1 AND tool_use_id = $2 AND result_seq IS NULL`,
				ev.session, d.ToolUseID, string(status), d.Content, d.IsError, ev.seq, ev.at)
			return err
		},
		func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `
				UPDATE subagent_sessions SET status = $3, failure_reason = $4, completed_at = $5
				 WHERE session_id = $1 AND parent_tool_use_id = $2 AND status = $6`,
				ev.session, d.ToolUseID, string(subStatus), reason, ev.at, string(domain.StatusRunning))
			return err
		},
	}
	if d.SubagentID == "" {
		writes = append(writes, logChunk(ev, prefix+d.Content))
	}
	return writes, nil
}

// spawn records a subagent when one of its events is first seen, with the
// objective of the Task call that spawned it; later events fill in what
// the first one lacked.
func spawn(ev event, id uuid.UUID, engineID, parentToolUseID, subagentType, model string) write {
	return func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
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
			ev.session, id, engineID, subagentType, parentToolUseID, model, string(domain.StatusRunning), ev.seq, ev.at)
		return err
	}
}

func logChunk(ev event, content string) write {
	return func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
			INSERT INTO session_log_chunks (id, session_id, kind, content, source_seq, recorded_at)
			VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT DO NOTHING`,
			ev.id("log"), ev.session, LogOutput, content, ev.seq, ev.at)
		return err
	}
}

// toolCallID derives a tool call's id from the engine's tool_use_id, so
// the call and its result name the same row.
func toolCallID(session uuid.UUID, toolUseID string) uuid.UUID {
	return uuid.NewSHA1(idNamespace, []byte(session.String()+"/tool_call/"+toolUseID))
}

// subagentUUID is the SubAgentId of an engine's subagent id, derived as
// the acl worker derives it for the activity stream, so that a subagent
// filters the activity and the transcript alike.
func subagentUUID(id string) uuid.UUID {
	u, err := uuid.Parse(id)
	if err != nil {
		u = uuid.NewSHA1(uuid.NameSpaceOID, []byte(id))
	}
	return u
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
