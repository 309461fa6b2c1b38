package localsocket

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/bus/feed"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/doors"
)

// Translate is the outbound message of a feed item (seed 002's types:
// system, assistant_text, stream_delta, tool_use, tool_result,
// permission_request, question, result, session_status), without its
// sessionId and eventId; nil for an item seed 002 has no message for.
func Translate(it doors.Item) map[string]any {
	obj := map[string]any{}
	_ = json.Unmarshal(it.Data, &obj)
	switch it.Event {
	case feed.KindAssistantText:
		return map[string]any{"type": "assistant_text", "uuid": obj["itemId"], "messageId": obj["messageId"], "text": obj["text"]}
	case feed.KindTextDelta:
		return map[string]any{"type": "stream_delta", "messageId": obj["messageId"], "index": obj["index"], "text": obj["text"]}
	case feed.KindToolCall:
		return map[string]any{"type": "tool_use", "uuid": obj["itemId"], "toolUseId": obj["toolUseId"], "toolName": obj["toolName"], "input": obj["input"]}
	case feed.KindToolResult:
		return map[string]any{"type": "tool_result", "uuid": obj["itemId"], "toolUseId": obj["toolUseId"], "toolName": obj["toolName"],
			"content": obj["content"], "isError": obj["isError"]}
	case feed.KindActivity:
		if obj["rawType"] != "session_started" {
			return nil
		}
		// The sidecar is up: the session's initialization metadata.
		var started map[string]any
		detail, _ := obj["detail"].(string)
		_ = json.Unmarshal([]byte(detail), &started)
		return map[string]any{"type": "system", "subtype": "init", "model": started["model"], "engine": started["engine"],
			"engineSessionId": started["engine_session_id"], "cwd": started["working_directory"], "resumed": started["resumed"]}
	case doors.EventDomain:
	default:
		return nil
	}
	switch it.Type {
	case domain.ToolPermissionRequestedEvent{}.EventType():
		var input any = obj["input"]
		var parsed map[string]any
		if s, ok := obj["input"].(string); ok && json.Unmarshal([]byte(s), &parsed) == nil {
			input = parsed
		}
		return map[string]any{"type": "permission_request", "requestId": obj["requestId"], "toolName": obj["toolName"],
			"toolInput": input, "expiresAt": obj["expiresAt"]}
	case domain.SessionWaitingForInputEvent{}.EventType():
		options := []map[string]any{}
		if list, ok := obj["options"].([]any); ok {
			for _, o := range list {
				options = append(options, map[string]any{"label": o})
			}
		}
		return map[string]any{"type": "question", "requestId": strconv.FormatUint(it.Seq, 10),
			"questions": []map[string]any{{"question": obj["questionContent"], "options": options}}, "expiresAt": obj["expiresAt"]}
	case domain.AgentSessionOutputReadyEvent{}.EventType():
		return map[string]any{"type": "result", "subtype": "success", "numTurns": obj["turnCount"], "filesChanged": obj["filesChanged"],
			"allTestsPassing": obj["allTestsPassing"]}
	case domain.AgentSessionFailedEvent{}.EventType():
		return map[string]any{"type": "session_status", "status": "closed", "agentbusStatus": "Failed",
			"reason": obj["failureReason"], "message": obj["message"]}
	}
	if after, ok := domain.StatusAfter(it.Type); ok {
		status := string(after)
		return map[string]any{"type": "session_status", "status": clientStatus(status), "agentbusStatus": status, "event": it.Type}
	}
	return nil
}

// clientStatus is seed 002's lifecycle word for an agentbus status:
// idle, processing, closed, or the status itself in lower case.
func clientStatus(status string) string {
	switch status {
	case "Idle":
		return "idle"
	case "Running", "Resuming":
		return "processing"
	case "Completed", "Cancelled", "Failed":
		return "closed"
	case "":
		return ""
	}
	return strings.ToLower(status)
}

// Item writes a feed item's message, named by the client's session id.
func (c *conn) Item(sessionID uuid.UUID, it doors.Item) error {
	m := Translate(it)
	if m == nil {
		return nil
	}
	m["sessionId"] = c.name(sessionID)
	m["eventId"] = it.Seq
	m["timestamp"] = it.At.UnixMilli()
	c.write(m)
	return nil
}

// InputAck says the agent received a prompt.
func (c *conn) InputAck(sessionID uuid.UUID, in doors.Input, it doors.Item) error {
	c.write(map[string]any{"type": "session_status", "sessionId": c.name(sessionID), "requestId": in.Ref, "status": "prompt_delivered",
		"messageId": in.MessageID.String(), "eventId": it.Seq, "timestamp": it.At.UnixMilli()})
	return nil
}

// InputTimeout says a prompt was not delivered in time; it stays queued.
func (c *conn) InputTimeout(sessionID uuid.UUID, in doors.Input) {
	c.write(map[string]any{"type": "session_status", "sessionId": c.name(sessionID), "requestId": in.Ref, "status": "prompt_timeout",
		"messageId": in.MessageID.String()})
}

// FeedFailed tells the client to resume the session.
func (c *conn) FeedFailed(sessionID uuid.UUID, lastSeq uint64, _ error) {
	c.write(map[string]any{"type": "error", "sessionId": c.name(sessionID), "kind": doors.KindInternal,
		"message": "the session's feed stopped: resume_session with lastEventId", "lastEventId": lastSeq, "agentbusSessionId": sessionID.String()})
}
