package ws

import (
	"encoding/json"

	"github.com/agentbus/agentbus/bus/feed"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/doors"
)

// Translate names a feed item's message and its data: the agent's text
// (and, with delta true, the text it is still writing), tool_use,
// tool_result, question, approval_request (a tool use or a plan), state
// (a status change), result (output ready for review), activity (any
// other activity item) and event (any other domain event: queue,
// metrics, budget, handoff).
func Translate(it doors.Item) (string, any) {
	switch it.Event {
	case feed.KindAssistantText:
		return "text", json.RawMessage(it.Data)
	case feed.KindTextDelta:
		return "text", withFields(it.Data, map[string]any{"delta": true})
	case feed.KindToolCall:
		return "tool_use", json.RawMessage(it.Data)
	case feed.KindToolResult:
		return "tool_result", json.RawMessage(it.Data)
	case doors.EventDomain:
	default:
		return "activity", json.RawMessage(it.Data)
	}
	switch it.Type {
	case domain.SessionWaitingForInputEvent{}.EventType():
		var d struct {
			QuestionContent string   `json:"questionContent"`
			Options         []string `json:"options"`
			ExpiresAt       string   `json:"expiresAt"`
		}
		_ = json.Unmarshal(it.Data, &d)
		return "question", map[string]any{"question": d.QuestionContent, "options": d.Options, "expiresAt": d.ExpiresAt}
	case domain.ToolPermissionRequestedEvent{}.EventType():
		var d struct {
			RequestID string `json:"requestId"`
			ToolName  string `json:"toolName"`
			Input     string `json:"input"`
			ExpiresAt string `json:"expiresAt"`
		}
		_ = json.Unmarshal(it.Data, &d)
		var input any = d.Input
		var obj map[string]any
		if json.Unmarshal([]byte(d.Input), &obj) == nil {
			input = obj
		}
		return "approval_request", map[string]any{"kind": "tool", "requestId": d.RequestID, "toolName": d.ToolName, "input": input, "expiresAt": d.ExpiresAt}
	case domain.SessionPlanPendingApprovalEvent{}.EventType():
		return "approval_request", withFields(it.Data, map[string]any{"kind": "plan"})
	case domain.AgentSessionOutputReadyEvent{}.EventType():
		return "result", json.RawMessage(it.Data)
	}
	if after, ok := domain.StatusAfter(it.Type); ok {
		status := string(after)
		return "state", withFields(it.Data, map[string]any{"status": status, "event": it.Type})
	}
	return "event", map[string]any{"type": it.Type, "data": json.RawMessage(it.Data)}
}

// withFields is the JSON object raw with fields added.
func withFields(raw json.RawMessage, fields map[string]any) map[string]any {
	out := map[string]any{}
	_ = json.Unmarshal(raw, &out)
	for k, v := range fields {
		out[k] = v
	}
	return out
}
