package claude

import (
	"encoding/json"
	"strings"
)

// The CLI's stream-json protocol: one JSON object per line in each
// direction. The shapes follow the type definitions of the Agent SDK
// (SDKUserMessage, SDKAssistantMessage, SDKResultMessage, SDKSystemMessage,
// SDKControlRequest, SDKControlResponse); only the fields the engine uses
// are declared.

// Frame types.
const (
	frameUser            = "user"
	frameAssistant       = "assistant"
	frameResult          = "result"
	frameSystem          = "system"
	frameControlRequest  = "control_request"
	frameControlResponse = "control_response"
	frameControlCancel   = "control_cancel_request"
	// frameStreamEvent carries one server-sent event of the model's
	// response (--include-partial-messages).
	frameStreamEvent = "stream_event"
)

// Control request subtypes.
const (
	controlInitialize     = "initialize"
	controlInterrupt      = "interrupt"
	controlCanUseTool     = "can_use_tool"
	controlHookCallback   = "hook_callback"
	controlGetSessionCost = "get_session_cost"
	controlUserDialog     = "request_user_dialog"
)

// Result subtypes.
const (
	resultSuccess = "success"
)

// interruptedToolUse is the tool_result content of a call cut short by the
// turn's end.
const interruptedToolUse = "[Request interrupted by user for tool use]"

// frame is any line the CLI writes.
type frame struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`

	// UUID identifies a user or assistant frame's entry in the
	// conversation's chain.
	UUID string `json:"uuid"`

	// system/init.
	SessionID string `json:"session_id"`
	Model     string `json:"model"`

	// user and assistant.
	Message         json.RawMessage `json:"message"`
	ParentToolUseID *string         `json:"parent_tool_use_id"`
	AgentID         string          `json:"agent_id"`
	SubagentType    string          `json:"subagent_type"`

	// control_request, control_cancel_request.
	RequestID string          `json:"request_id"`
	Request   json.RawMessage `json:"request"`

	// control_response.
	Response *controlResponse `json:"response"`

	// stream_event.
	Event json.RawMessage `json:"event"`

	raw []byte
}

// parent returns the subagent's Task call a frame belongs to, "" for the
// main agent.
func (f *frame) parent() string {
	if f.ParentToolUseID == nil {
		return ""
	}
	return *f.ParentToolUseID
}

// apiMessage is the Messages API message inside user and assistant frames.
type apiMessage struct {
	ID      string          `json:"id"`
	Model   string          `json:"model"`
	Content json.RawMessage `json:"content"`
	Usage   *apiUsage       `json:"usage"`
}

// blocks returns the message's content blocks; a string content is one
// text block.
func (m apiMessage) blocks() []contentBlock {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []contentBlock{{Type: "text", Text: s}}
	}
	var bs []contentBlock
	_ = json.Unmarshal(m.Content, &bs)
	return bs
}

type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// resultText returns a tool_result's content as text: a string, or the
// text of its blocks.
func resultText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var bs []contentBlock
	if json.Unmarshal(raw, &bs) != nil {
		return string(raw)
	}
	parts := make([]string, 0, len(bs))
	for _, b := range bs {
		switch b.Type {
		case "text":
			parts = append(parts, b.Text)
		default:
			parts = append(parts, "["+b.Type+"]")
		}
	}
	return strings.Join(parts, "\n")
}

type apiUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

// context returns the size of the context a model call saw and produced.
func (u apiUsage) context() int64 {
	return u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens + u.OutputTokens
}

// resultFrame is a result (SDKResultMessage): the end of a turn.
type resultFrame struct {
	Subtype         string                `json:"subtype"`
	IsError         bool                  `json:"is_error"`
	Result          string                `json:"result"`
	Errors          []string              `json:"errors"`
	NumTurns        int                   `json:"num_turns"`
	TotalCostUSD    float64               `json:"total_cost_usd"`
	Usage           apiUsage              `json:"usage"`
	ModelUsage      map[string]modelUsage `json:"modelUsage"`
	UserMessageUUID string                `json:"user_message_uuid"`
}

type modelUsage struct {
	ContextWindow int64 `json:"contextWindow"`
}

// controlRequest is the request of a control_request the CLI sends.
type controlRequest struct {
	Subtype    string          `json:"subtype"`
	ToolName   string          `json:"tool_name"`
	Input      json.RawMessage `json:"input"`
	ToolUseID  string          `json:"tool_use_id"`
	AgentID    string          `json:"agent_id"`
	CallbackID string          `json:"callback_id"`
}

// hookInput is the input of a hook_callback.
type hookInput struct {
	HookEventName string          `json:"hook_event_name"`
	ToolName      string          `json:"tool_name"`
	ToolInput     json.RawMessage `json:"tool_input"`
	ToolUseID     string          `json:"tool_use_id"`
	AgentID       string          `json:"agent_id"`
}

// controlResponse is the response of a control_response.
type controlResponse struct {
	Subtype   string          `json:"subtype"`
	RequestID string          `json:"request_id"`
	Response  json.RawMessage `json:"response,omitempty"`
	Error     string          `json:"error,omitempty"`
}

// outControlRequest is a control_request the engine sends.
type outControlRequest struct {
	Type      string `json:"type"`
	RequestID string `json:"request_id"`
	Request   any    `json:"request"`
}

// outControlResponse answers a control_request of the CLI.
type outControlResponse struct {
	Type     string          `json:"type"`
	Response controlResponse `json:"response"`
}

// userFrame is a user turn the engine sends (SDKUserMessage).
type userFrame struct {
	Type            string      `json:"type"`
	Message         userMessage `json:"message"`
	ParentToolUseID *string     `json:"parent_tool_use_id"`
	SessionID       string      `json:"session_id"`
	UUID            string      `json:"uuid"`
}

type userMessage struct {
	Role    string         `json:"role"`
	Content []contentBlock `json:"content"`
}

// permissionAllow and permissionDeny answer can_use_tool.
type permissionAllow struct {
	Behavior     string          `json:"behavior"`
	UpdatedInput json.RawMessage `json:"updatedInput"`
}

type permissionDeny struct {
	Behavior string `json:"behavior"`
	Message  string `json:"message"`
}

// hookOutput answers a PreToolUse hook_callback.
type hookOutput struct {
	HookSpecificOutput *preToolUseOutput `json:"hookSpecificOutput,omitempty"`
}

type preToolUseOutput struct {
	HookEventName            string `json:"hookEventName"`
	PermissionDecision       string `json:"permissionDecision"`
	PermissionDecisionReason string `json:"permissionDecisionReason,omitempty"`
}
