// Package feed defines the items of a session's live feed that are not
// domain events: what the agent does, as the ACL records it, and the text
// it is still writing. The ACL publishes each on AGENTS_EVENTS under
// agents.evt.activity.<sessionId>.<kind>, so that one stream holds a
// session's whole feed (its status, queue and activity) in one total
// order, and every live door reads that order by stream sequence.
package feed

import (
	"time"
)

// Aggregate is the subject token of feed items:
// agents.evt.activity.<sessionId>.<kind>.
const Aggregate = "activity"

// Kinds of feed items: the envelope type, the last subject token and the
// SSE event name.
const (
	// KindAssistantText is a text block the assistant finished.
	KindAssistantText = "assistant_text"
	// KindToolCall is a tool call with its input.
	KindToolCall = "tool_call"
	// KindToolResult is the result of a tool call.
	KindToolResult = "tool_result"
	// KindActivity is any other recorded activity item: subagent messages,
	// status and metrics lines, logs, unknown or invalid raw events.
	KindActivity = "activity"
	// KindTextDelta is a piece of text the assistant is still writing; it
	// is not recorded, the finished assistant_text is.
	KindTextDelta = "text_delta"
)

// Kinds lists every kind.
var Kinds = []string{KindAssistantText, KindToolCall, KindToolResult, KindActivity, KindTextDelta}

// LiveAssistantText is a finished text block of the assistant or a subagent.
type LiveAssistantText struct {
	SessionID  string    `json:"sessionId" doc:"The session's id." format:"uuid" example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	ItemID     string    `json:"itemId" doc:"The activity item's id." format:"uuid" example:"5f1c9a0e-2b7d-5c1e-8f3a-9d4b6e2a7c01"`
	MessageID  string    `json:"messageId,omitempty" doc:"Groups the blocks of one model message." example:"msg_8c923eae_001"`
	Text       string    `json:"text" doc:"The text." example:"I'll start by looking at the project."`
	SubAgentID string    `json:"subAgentId,omitempty" doc:"Set when a subagent wrote it." example:"7a2d4c1b-3e5f-4a6b-8c9d-0e1f2a3b4c5d"`
	OccurredAt time.Time `json:"occurredAt" doc:"When the sidecar saw it." example:"2025-01-02T15:04:05Z"`
}

// LiveToolCall is one tool call and its input.
type LiveToolCall struct {
	SessionID  string         `json:"sessionId" doc:"The session's id." format:"uuid" example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	ItemID     string         `json:"itemId" doc:"The activity item's id." format:"uuid" example:"5f1c9a0e-2b7d-5c1e-8f3a-9d4b6e2a7c01"`
	MessageID  string         `json:"messageId,omitempty" doc:"Groups the blocks of one model message." example:"msg_8c923eae_001"`
	ToolUseID  string         `json:"toolUseId" doc:"Identifies the call; its tool_result carries the same id." example:"toolu_8c923eae_003"`
	ToolName   string         `json:"toolName" doc:"The tool called." example:"Bash"`
	Input      map[string]any `json:"input" doc:"The tool's input, a JSON object."`
	SubAgentID string         `json:"subAgentId,omitempty" doc:"Set when a subagent made the call." example:"7a2d4c1b-3e5f-4a6b-8c9d-0e1f2a3b4c5d"`
	OccurredAt time.Time      `json:"occurredAt" doc:"When the sidecar saw it." example:"2025-01-02T15:04:05Z"`
}

// LiveToolResult is the result of one tool call.
type LiveToolResult struct {
	SessionID  string    `json:"sessionId" doc:"The session's id." format:"uuid" example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	ItemID     string    `json:"itemId" doc:"The activity item's id." format:"uuid" example:"5f1c9a0e-2b7d-5c1e-8f3a-9d4b6e2a7c01"`
	ToolUseID  string    `json:"toolUseId" doc:"The call this result belongs to." example:"toolu_8c923eae_003"`
	ToolName   string    `json:"toolName,omitempty" doc:"The tool called, when its call was seen." example:"Bash"`
	Content    string    `json:"content" doc:"The tool's output or error text." example:"ok  example.com/service 0.412s"`
	IsError    bool      `json:"isError" doc:"True when the tool failed, was denied or was interrupted." example:"false"`
	SubAgentID string    `json:"subAgentId,omitempty" doc:"Set when the call was a subagent's." example:"7a2d4c1b-3e5f-4a6b-8c9d-0e1f2a3b4c5d"`
	OccurredAt time.Time `json:"occurredAt" doc:"When the sidecar saw it." example:"2025-01-02T15:04:05Z"`
}

// LiveActivity is any other activity item, as the activity timeline records it.
type LiveActivity struct {
	SessionID  string    `json:"sessionId" doc:"The session's id." format:"uuid" example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	ItemID     string    `json:"itemId" doc:"The activity item's id." format:"uuid" example:"5f1c9a0e-2b7d-5c1e-8f3a-9d4b6e2a7c01"`
	Type       string    `json:"type" doc:"The activity item's type." enum:"Message,ToolCallStart,ToolCallEnd,SubAgentSpawn,SubAgentComplete,PlanModeEnter,PlanModeExit,UserQuestion,UserAnswer,TodoUpdate,StatusChange,MetricsUpdate,SkillEnabled,HandoffInitiated,ToolPermission,UnknownEvent" example:"Message"`
	RawType    string    `json:"rawType" doc:"The raw sidecar event it was recorded from." example:"subagent_message"`
	Summary    string    `json:"summary" doc:"One line." example:"Looking at the project"`
	Detail     string    `json:"detail,omitempty" doc:"The full text." example:"The full text of the item."`
	ToolName   string    `json:"toolName,omitempty" doc:"The tool, for tool items." example:"Bash"`
	SubAgentID string    `json:"subAgentId,omitempty" doc:"Set for a subagent's item." example:"7a2d4c1b-3e5f-4a6b-8c9d-0e1f2a3b4c5d"`
	OccurredAt time.Time `json:"occurredAt" doc:"When the sidecar saw it." example:"2025-01-02T15:04:05Z"`
}

// LiveTextDelta is a piece of an assistant text block still being written.
type LiveTextDelta struct {
	SessionID  string    `json:"sessionId" doc:"The session's id." format:"uuid" example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	MessageID  string    `json:"messageId,omitempty" doc:"The model message the text belongs to." example:"msg_8c923eae_001"`
	Index      int       `json:"index" doc:"The content block within that message." example:"0"`
	Text       string    `json:"text" doc:"The new text, to append to what came before." example:"I'll start by looking at the project."`
	OccurredAt time.Time `json:"occurredAt" doc:"When the sidecar saw it." example:"2025-01-02T15:04:05Z"`
}
