package protocol

// MessageDelivered says a steering message was injected as the agent's input.
type MessageDelivered struct {
	// MessageID is the steering_message's message_id.
	MessageID string `json:"message_id"`
	// Priority is the message's priority, Immediate or Queued.
	Priority string `json:"priority"`
}

// EventType returns "message_delivered".
func (MessageDelivered) EventType() string { return EventMessageDelivered }

// InterruptAck says the current turn stopped; the agent waits for a message.
type InterruptAck struct {
	// CommandID is the interrupt command's id.
	CommandID string `json:"command_id"`
}

// EventType returns "interrupt_ack".
func (InterruptAck) EventType() string { return EventInterruptAck }

// PauseAck says the agent stopped at a safe point and keeps its state.
type PauseAck struct {
	// CommandID is the pause command's id.
	CommandID string `json:"command_id"`
}

// EventType returns "pause_ack".
func (PauseAck) EventType() string { return EventPauseAck }

// ResumeAck says a paused agent goes on.
type ResumeAck struct {
	// CommandID is the resume command's id.
	CommandID string `json:"command_id"`
}

// EventType returns "resume_ack".
func (ResumeAck) EventType() string { return EventResumeAck }

// StopAck says the agent stopped; session_end follows.
type StopAck struct {
	// CommandID is the stop command's id.
	CommandID string `json:"command_id"`
	// Forced is true when the agent did not stop within the timeout and
	// was abandoned.
	Forced bool `json:"forced"`
}

// EventType returns "stop_ack".
func (StopAck) EventType() string { return EventStopAck }

// ReloadConfigAck says the agent runs with the new config.
type ReloadConfigAck struct {
	// CommandID is the reload_config command's id.
	CommandID string `json:"command_id"`
	// Model is the model after the reload.
	Model string `json:"model"`
	// EngineSessionID is the engine's session id after the reload.
	EngineSessionID string `json:"engine_session_id"`
}

// EventType returns "reload_config_ack".
func (ReloadConfigAck) EventType() string { return EventReloadConfigAck }

// Error codes of an error event.
const (
	// CodeUnknownCommand: the command type is not one of the contract's.
	CodeUnknownCommand = "unknown_command"
	// CodeBadData: the entry or its data is malformed or lacks a field.
	CodeBadData = "bad_data"
	// CodeNotPending: nothing waits for this answer, decision or response.
	CodeNotPending = "not_pending"
	// CodeReloadFailed: the engine could not take the new config.
	CodeReloadFailed = "reload_failed"
)

// ErrorEvent reports a command the sidecar could not handle. The sidecar
// goes on with the next command.
type ErrorEvent struct {
	// Code classifies the problem (Code* constants).
	Code string `json:"code"`
	// Message describes it.
	Message string `json:"error"`
	// CommandType is the command entry's type, as read.
	CommandType string `json:"command_type,omitempty"`
	// CommandID is the command entry's command_id, as read.
	CommandID string `json:"command_id,omitempty"`
	// EntryID is the command entry's stream id.
	EntryID string `json:"entry_id,omitempty"`
}

// EventType returns "error".
func (ErrorEvent) EventType() string { return EventError }
