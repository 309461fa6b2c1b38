package protocol

// The events that answer a command without confirming a control: a
// steering message delivered, a command refused.

// MessageDelivered says a steering message was injected as the agent's input.
type MessageDelivered struct {
	// MessageID is the steering_message's message_id.
	MessageID string `json:"message_id"`
	// Priority is the message's priority, Immediate or Queued.
	Priority string `json:"priority"`
}

// EventType returns "message_delivered".
func (MessageDelivered) EventType() string { return EventMessageDelivered }

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
