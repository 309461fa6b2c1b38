package protocol

import (
	"encoding/json"
	"slices"
)

// Raw event types a sidecar writes to agent:session:{<id>} (DESIGN.md §3).
const (
	EventSessionStarted      = "session_started"
	EventAssistantMessage    = "assistant_message"
	EventToolResult          = "tool_result"
	EventSubagentMessage     = "subagent_message"
	EventUsageUpdate         = "usage_update"
	EventTurnCompleted       = "turn_completed"
	EventContextNearingLimit = "context_nearing_limit"
	EventContextExhausted    = "context_exhausted"
	EventHandoffDocument     = "handoff_document"
	EventVoluntaryHandoff    = "voluntary_handoff"
	EventPermissionRequest   = "permission_request"
	EventSessionEnd          = "session_end"
	EventMessageDelivered    = "message_delivered"
	EventValidationResult    = "validation_result"
	// EventError reports a command the sidecar could not handle (unknown
	// type, bad data, nothing pending to answer); the sidecar goes on.
	EventError = "error"
	// EventTextDelta is a piece of a text block the model is still writing;
	// the finished block follows as an assistant_message.
	EventTextDelta = "text_delta"
)

// EventTypes lists every raw event type, in the order README.md documents them.
var EventTypes = slices.Concat(
	[]string{EventSessionStarted, EventAssistantMessage, EventTextDelta, EventToolResult, EventSubagentMessage,
		EventUsageUpdate, EventTurnCompleted, EventContextNearingLimit, EventContextExhausted,
		EventHandoffDocument, EventVoluntaryHandoff, EventPermissionRequest, EventMessageDelivered},
	AckTypes,
	[]string{EventValidationResult, EventError, EventSessionEnd},
)

// Event is the data of one raw event; its type names the entry.
type Event interface {
	// EventType returns the entry's type field.
	EventType() string
}

// Block types of an assistant_message.
const (
	BlockText    = "text"
	BlockToolUse = "tool_use"
)

// SessionStarted says the sidecar is ready and carries the engine's own
// session id, which a later sidecar can resume.
type SessionStarted struct {
	// Engine is the engine's name: script or claude.
	Engine string `json:"engine"`
	// EngineSessionID is the engine's own session id (for resume).
	EngineSessionID string `json:"engine_session_id"`
	// Model is the model the agent runs on.
	Model string `json:"model"`
	// WorkingDirectory is where the agent works.
	WorkingDirectory string `json:"working_directory,omitempty"`
	// Resumed is true when the engine resumed an earlier engine session.
	Resumed bool `json:"resumed"`
	// Restarted is true when an earlier sidecar of this session had already
	// handled commands (its cursor was found).
	Restarted bool `json:"restarted"`
	// PID is the sidecar's process id.
	PID int `json:"pid"`
}

// EventType returns "session_started".
func (SessionStarted) EventType() string { return EventSessionStarted }

// AssistantMessage is one content block of the agent: text, or a tool call.
// A tool call made by a subagent carries SubagentID and ParentToolUseID.
type AssistantMessage struct {
	// MessageID groups the blocks of one model message.
	MessageID string `json:"message_id"`
	// BlockType is "text" or "tool_use".
	BlockType string `json:"block_type"`
	// Text is the text of a text block.
	Text string `json:"text,omitempty"`
	// ToolUseID identifies a tool_use block; tool_result refers to it.
	ToolUseID string `json:"tool_use_id,omitempty"`
	// ToolName is the tool of a tool_use block (Read, Bash, TodoWrite,
	// AskUserQuestion, EnterPlanMode, ExitPlanMode, Task, ...).
	ToolName string `json:"tool_name,omitempty"`
	// Input is the tool_use block's input, a JSON object.
	Input json.RawMessage `json:"input,omitempty"`
	// Model is the model that produced the block.
	Model string `json:"model,omitempty"`
	// SubagentID is set when a subagent made the call.
	SubagentID string `json:"subagent_id,omitempty"`
	// ParentToolUseID is the Task tool call that spawned that subagent.
	ParentToolUseID string `json:"parent_tool_use_id,omitempty"`
}

// EventType returns "assistant_message".
func (AssistantMessage) EventType() string { return EventAssistantMessage }

// TextDelta is a piece of an assistant text block still being written.
// Deltas are for a live view only: the finished block comes as an
// assistant_message, which is what the session records.
type TextDelta struct {
	// MessageID is the model message the text belongs to.
	MessageID string `json:"message_id,omitempty"`
	// Index is the content block within that message.
	Index int `json:"index"`
	// Text is the new text, to append to what came before.
	Text string `json:"text"`
}

// EventType returns "text_delta".
func (TextDelta) EventType() string { return EventTextDelta }

// ToolResult is the result of one tool call.
type ToolResult struct {
	// ToolUseID is the tool_use block this result belongs to.
	ToolUseID string `json:"tool_use_id"`
	// Content is the tool's output (or the error text).
	Content string `json:"content"`
	// IsError is true when the tool failed, was denied or was interrupted.
	IsError bool `json:"is_error"`
	// SubagentID is set when the call was a subagent's.
	SubagentID string `json:"subagent_id,omitempty"`
	// ParentToolUseID is the Task tool call of that subagent.
	ParentToolUseID string `json:"parent_tool_use_id,omitempty"`
}

// EventType returns "tool_result".
func (ToolResult) EventType() string { return EventToolResult }

// SubagentMessage is a text message of a subagent.
type SubagentMessage struct {
	// SubagentID identifies the subagent.
	SubagentID string `json:"subagent_id"`
	// SubagentType is the subagent's definition name.
	SubagentType string `json:"subagent_type,omitempty"`
	// ParentToolUseID is the Task tool call that spawned the subagent.
	ParentToolUseID string `json:"parent_tool_use_id"`
	// MessageID identifies the subagent's model message.
	MessageID string `json:"message_id"`
	// Text is the message text.
	Text string `json:"text"`
	// Model is the subagent's model.
	Model string `json:"model,omitempty"`
}

// EventType returns "subagent_message".
func (SubagentMessage) EventType() string { return EventSubagentMessage }

// UsageUpdate reports what one model call cost and the context window after
// it. Cost and tokens are increments (sum them); the context window is a
// snapshot (replace it). A subagent's usage has IsSubagent and SubagentID,
// and its context window is the subagent's own.
type UsageUpdate struct {
	// Model is the model that was called.
	Model string `json:"model"`
	// CostUSD is the call's cost in US dollars.
	CostUSD float64 `json:"cost_usd"`
	// InputTokens are the call's uncached input tokens.
	InputTokens int64 `json:"input_tokens"`
	// OutputTokens are the call's output tokens.
	OutputTokens int64 `json:"output_tokens"`
	// CacheReadTokens are input tokens read from the prompt cache.
	CacheReadTokens int64 `json:"cache_read_tokens"`
	// CacheWriteTokens are input tokens written to the prompt cache.
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	// ContextWindowUsedTokens is the current size of the context.
	ContextWindowUsedTokens int64 `json:"context_window_used_tokens"`
	// ContextWindowMaxTokens is the model's context limit.
	ContextWindowMaxTokens int64 `json:"context_window_max_tokens"`
	// IsSubagent is true for a subagent's usage.
	IsSubagent bool `json:"is_subagent"`
	// SubagentID identifies that subagent.
	SubagentID string `json:"subagent_id,omitempty"`
}

// EventType returns "usage_update".
func (UsageUpdate) EventType() string { return EventUsageUpdate }

// TurnCompleted says a turn ended by itself (the agent finished answering
// its input). A turn cut short by interrupt, Immediate steering, stop or
// context exhaustion, or one that failed, has no turn_completed.
type TurnCompleted struct {
	// CostUSD is what the turn cost, subagents included.
	CostUSD float64 `json:"cost_usd"`
	// TotalCostUSD is what the session has cost so far.
	TotalCostUSD float64 `json:"total_cost_usd"`
	// DurationMS is how long the turn took.
	DurationMS int64 `json:"duration_ms"`
	// NumTurns counts the turns completed in the session, this one included.
	NumTurns int `json:"num_turns"`
	// Final is true when the session ends right after this turn (a
	// session_end with reason "completed" follows).
	Final bool `json:"final"`
	// Done is true when the agent's work is done: it has nothing of its own
	// left and no message waits, so its output is ready for review. A
	// sidecar that stays idle then waits for a message or stop; otherwise
	// Final is true as well.
	Done bool `json:"done,omitempty"`
	// Checkpoint is the state the turn left: written before this event,
	// so a checkpoint reported is one that can be restored. Absent when
	// the sidecar keeps no checkpoints or the snapshot failed.
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
}

// Checkpoint is the state of a session at the end of a turn: its working
// directory as a snapshot in the session's object store, and where the
// engine's conversation stood.
type Checkpoint struct {
	// Turn is the turn the checkpoint ends, counted over the session's
	// whole life (its earlier sidecars included).
	Turn int `json:"turn"`
	// Commit is the snapshot of the working directory (a git commit id in
	// the session's checkpoint store).
	Commit string `json:"commit"`
	// Tree is the snapshot's tree id: equal trees, equal files.
	Tree string `json:"tree"`
	// FilesChanged counts the files the turn added, changed or removed.
	FilesChanged int `json:"files_changed"`
	// EngineSessionID is the engine's session the conversation is in.
	EngineSessionID string `json:"engine_session_id"`
	// Position is the engine's own position in that conversation (the
	// claude engine: the last message's uuid; the script engine: its
	// place in the scenario).
	Position string `json:"position,omitempty"`
	// Bytes is the size of the snapshot's files.
	Bytes int64 `json:"bytes,omitempty"`
	// AddedBytes is the size of the files the turn added or changed.
	AddedBytes int64 `json:"added_bytes,omitempty"`
	// StoreBytes is the size on disk of the session's checkpoint store
	// after this checkpoint and the retention's pruning.
	StoreBytes int64 `json:"store_bytes,omitempty"`
	// Pruned lists the commits of the earlier checkpoints the retention
	// policy dropped from the store after this one was taken: they can
	// no longer be forked or rewound to.
	Pruned []string `json:"pruned,omitempty"`
}

// EventType returns "turn_completed".
func (TurnCompleted) EventType() string { return EventTurnCompleted }

// ContextNearingLimit says the context crossed the warning threshold.
type ContextNearingLimit struct {
	// Percent is the context usage, 0-100.
	Percent float64 `json:"percent"`
	// ThresholdPercent is the configured warning threshold.
	ThresholdPercent float64 `json:"threshold_percent"`
	// UsedTokens is the context size.
	UsedTokens int64 `json:"used_tokens"`
	// MaxTokens is the context limit.
	MaxTokens int64 `json:"max_tokens"`
}

// EventType returns "context_nearing_limit".
func (ContextNearingLimit) EventType() string { return EventContextNearingLimit }

// ContextExhausted says the context is full; handoff_document and
// session_end follow.
type ContextExhausted struct {
	// Percent is the context usage, 100 or more.
	Percent float64 `json:"percent"`
	// UsedTokens is the context size.
	UsedTokens int64 `json:"used_tokens"`
	// MaxTokens is the context limit.
	MaxTokens int64 `json:"max_tokens"`
}

// EventType returns "context_exhausted".
func (ContextExhausted) EventType() string { return EventContextExhausted }

// HandoffDocument is what the next session of a chain needs to go on.
type HandoffDocument struct {
	// Summary says what was done.
	Summary string `json:"summary"`
	// RemainingWork says what is left to do.
	RemainingWork string `json:"remaining_work"`
	// KeyDecisions carries important context forward; may be empty.
	KeyDecisions string `json:"key_decisions"`
	// TokensUsed is the context size when the document was written.
	TokensUsed int64 `json:"tokens_used"`
	// ChainID is the session chain from the config, when there is one.
	ChainID string `json:"chain_id,omitempty"`
}

// EventType returns "handoff_document".
func (HandoffDocument) EventType() string { return EventHandoffDocument }

// VoluntaryHandoff says the agent chose to hand off, and carries the
// handoff document (no separate handoff_document follows); session_end
// with reason "voluntary_handoff" ends the session.
type VoluntaryHandoff struct {
	// Reason is why the agent hands off.
	Reason string `json:"reason"`
	// Summary says what was done.
	Summary string `json:"summary"`
	// RemainingWork says what is left to do.
	RemainingWork string `json:"remaining_work"`
	// KeyDecisions carries important context forward; may be empty.
	KeyDecisions string `json:"key_decisions"`
	// TokensUsed is the context size at the handoff.
	TokensUsed int64 `json:"tokens_used"`
}

// EventType returns "voluntary_handoff".
func (VoluntaryHandoff) EventType() string { return EventVoluntaryHandoff }

// PermissionRequest says a tool call waits for approval; a
// permission_response with the same request_id answers it. Without an
// answer within TimeoutMS the sidecar denies the call (fails closed).
type PermissionRequest struct {
	// RequestID correlates the response.
	RequestID string `json:"request_id"`
	// ToolUseID is the waiting tool call.
	ToolUseID string `json:"tool_use_id"`
	// ToolName is the tool.
	ToolName string `json:"tool_name"`
	// Input is the tool call's input, a JSON object.
	Input json.RawMessage `json:"input"`
	// TimeoutMS is how long the sidecar waits before denying.
	TimeoutMS int64 `json:"timeout_ms"`
	// SubagentID is set when a subagent asks.
	SubagentID string `json:"subagent_id,omitempty"`
}

// EventType returns "permission_request".
func (PermissionRequest) EventType() string { return EventPermissionRequest }

// Session end statuses.
const (
	StatusSuccess = "success"
	StatusError   = "error"
)

// Session end reasons.
const (
	// ReasonCompleted: the agent finished its work (success).
	ReasonCompleted = "completed"
	// ReasonStopped: a stop command ended the session (success).
	ReasonStopped = "stopped"
	// ReasonContextExhausted: the context window filled up (success; the
	// handoff_document precedes).
	ReasonContextExhausted = "context_exhausted"
	// ReasonVoluntaryHandoff: the agent handed off (success).
	ReasonVoluntaryHandoff = "voluntary_handoff"
	// ReasonAgentError: the agent or its engine failed (error).
	ReasonAgentError = "agent_error"
	// ReasonConfigError: the composed config could not be used (error).
	ReasonConfigError = "config_error"
	// ReasonTerminated: the sidecar was told to exit by a signal (error).
	ReasonTerminated = "terminated"
	// ReasonInfrastructureError: the sidecar died without a session_end;
	// written by the launcher (error).
	ReasonInfrastructureError = "infrastructure_error"
)

// Failure reasons of an error session_end, named as the domain's
// FailureReason values.
const (
	FailureAgentError          = "AgentError"
	FailureInfrastructureError = "InfrastructureError"
)

// SessionEnd is the last event of a session: nothing follows it.
type SessionEnd struct {
	// Status is "success" or "error".
	Status string `json:"status"`
	// Reason says why the session ended (Reason* constants).
	Reason string `json:"reason"`
	// FailureReason is the domain's FailureReason for an error: AgentError
	// or InfrastructureError; empty on success.
	FailureReason string `json:"failure_reason,omitempty"`
	// ExitCode is the agent's exit code: 0 on success; for a dead sidecar
	// its process exit code, -1 when killed by a signal.
	ExitCode int `json:"exit_code"`
	// Error describes the failure; empty on success.
	Error string `json:"error,omitempty"`
	// NumTurns counts the completed turns.
	NumTurns int `json:"num_turns"`
	// TotalCostUSD is what the session cost.
	TotalCostUSD float64 `json:"total_cost_usd"`
	// DurationMS is how long the sidecar ran.
	DurationMS int64 `json:"duration_ms"`
}

// EventType returns "session_end".
func (SessionEnd) EventType() string { return EventSessionEnd }

// MaxValidationOutput is how much of a check's output validation_result
// carries: the end, where test runners and linters sum up.
const MaxValidationOutput = 4000

// ValidationResult is the data of validation_result: how each check of a
// run_validation went.
type ValidationResult struct {
	// CommandID is the run_validation's command_id.
	CommandID string `json:"command_id"`
	// Checks are the results, in the order of the command's checks.
	Checks []CheckResult `json:"checks"`
}

// CheckResult is how one check went.
type CheckResult struct {
	// Name and Command are the check's.
	Name    string `json:"name"`
	Command string `json:"command"`
	// ExitCode is the command's exit status; -1 when it did not exit by
	// itself (timed out, or could not start).
	ExitCode int `json:"exit_code"`
	// TimedOut is true when the check ran past the timeout and was killed.
	TimedOut bool `json:"timed_out,omitempty"`
	// Output is the end of its standard output and error, at most
	// MaxValidationOutput characters.
	Output string `json:"output"`
}

// EventType returns "validation_result".
func (ValidationResult) EventType() string { return EventValidationResult }
