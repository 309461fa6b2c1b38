package projections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// write is one statement of a raw event's projection; a raw event's
// writes commit together.
type write func(ctx context.Context, db postgres.Execer) error

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
	return func(ctx context.Context, db postgres.Execer) error {
		return postgres.CancelSubagents(ctx, db, ev.source())
	}
}

// delivered records a message of a person, the system or a webhook in the
// transcript where the agent received it. The raw event names the message
// only; its content and source are in the session's queue, where the
// message stays once delivered. A message the queue does not hold adds
// nothing.
func delivered(ev event, messageID string) write {
	return func(ctx context.Context, db postgres.Execer) error {
		return postgres.InsertDeliveredMessage(ctx, db, ev.source(), ev.id("message"), messageID)
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
	return func(ctx context.Context, db postgres.Execer) error {
		return postgres.InsertAgentMessage(ctx, db, ev.source(), ev.id("message"), source, sub, content, model)
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
	writes = append(writes, func(ctx context.Context, db postgres.Execer) error {
		return postgres.InsertToolCall(ctx, db, ev.source(), toolCallID(ev.session, d.ToolUseID), d.ToolUseID, sub, d.ToolName, input)
	})
	if sub == nil {
		writes = append(writes, logChunk(ev, "[tool] "+d.ToolName+" "+input))
	}
	return writes, nil
}

// toolResult attaches a result to its call, once, and ends the subagents
// the call spawned. A result whose call is not recorded yet waits for it;
// one whose call never comes attaches to nothing.
func toolResult(ev event, d protocol.ToolResult) ([]write, error) {
	if d.ToolUseID == "" {
		return nil, fmt.Errorf("%w: tool_result without tool_use_id", errUnreadable)
	}
	status, subStatus, reason, prefix := domain.ToolCallSuccess, domain.StatusCompleted, "", "[result] "
	if d.IsError {
		status, subStatus, reason, prefix = domain.ToolCallError, domain.StatusFailed, string(domain.FailureAgentError), "[error] "
	}
	writes := []write{
		func(ctx context.Context, db postgres.Execer) error {
			return postgres.CompleteToolCall(ctx, db, ev.source(), d.ToolUseID, status, d.Content, d.IsError)
		},
		func(ctx context.Context, db postgres.Execer) error {
			return postgres.EndSubagentsOfCall(ctx, db, ev.source(), d.ToolUseID, subStatus, reason)
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
	return func(ctx context.Context, db postgres.Execer) error {
		return postgres.UpsertSubagent(ctx, db, ev.source(), postgres.Subagent{ID: id, EngineID: engineID,
			Type: subagentType, ParentToolUseID: parentToolUseID, Model: model})
	}
}

func logChunk(ev event, content string) write {
	return func(ctx context.Context, db postgres.Execer) error {
		return postgres.InsertOutputChunk(ctx, db, ev.source(), ev.id("log"), LogOutput, content)
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
