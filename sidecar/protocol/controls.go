package protocol

// The two-phase controls: a command the control plane sends and waits to
// see acknowledged, and the ack the sidecar answers with, which echoes the
// command's command_id. A control is declared here once, its command data
// and its ack side by side; control.All pairs each with the session's
// side of it.

// Control command types, each with the type of its ack.
const (
	CommandInterrupt     = "interrupt"
	EventInterruptAck    = "interrupt_ack"
	CommandPause         = "pause"
	EventPauseAck        = "pause_ack"
	CommandResume        = "resume"
	EventResumeAck       = "resume_ack"
	CommandStop          = "stop"
	EventStopAck         = "stop_ack"
	CommandReloadConfig  = "reload_config"
	EventReloadConfigAck = "reload_config_ack"
)

// ControlCommandTypes lists the control commands, in the order README.md
// documents them.
var ControlCommandTypes = []string{CommandInterrupt, CommandPause, CommandResume, CommandStop, CommandReloadConfig}

// AckTypes lists the ack event types, in the order README.md documents them.
var AckTypes = []string{EventInterruptAck, EventPauseAck, EventResumeAck, EventStopAck, EventReloadConfigAck}

// AckedAtRest are the controls whose command stays unanswered until the
// agent is at rest (a turn cut short, a safe point reached, the agent
// stopped), with the type of the ack that answers each then; the others
// are acknowledged as they are handled.
var AckedAtRest = map[string]string{CommandInterrupt: EventInterruptAck, CommandPause: EventPauseAck, CommandStop: EventStopAck}

// controlData are the data types of the control commands and their acks.
var controlData = map[string]func() any{
	CommandInterrupt:     func() any { return &Interrupt{} },
	EventInterruptAck:    func() any { return &InterruptAck{} },
	CommandPause:         func() any { return &Pause{} },
	EventPauseAck:        func() any { return &PauseAck{} },
	CommandResume:        func() any { return &Resume{} },
	EventResumeAck:       func() any { return &ResumeAck{} },
	CommandStop:          func() any { return &Stop{} },
	EventStopAck:         func() any { return &StopAck{} },
	CommandReloadConfig:  func() any { return &ReloadConfig{} },
	EventReloadConfigAck: func() any { return &ReloadConfigAck{} },
}

// Interrupt is the data of an interrupt command (no fields).
type Interrupt struct{}

// Pause is the data of a pause command.
type Pause struct {
	// Reason says why, for the log (e.g. "budget_exhausted"); optional.
	Reason string `json:"reason,omitempty"`
}

// Resume is the data of a resume command (no fields).
type Resume struct{}

// Stop is the data of a stop command.
type Stop struct {
	// TimeoutMS overrides the config's stop_timeout_ms: how long the agent
	// may take to stop before it is abandoned; optional.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// Force abandons the agent at once instead of waiting; optional.
	Force bool `json:"force,omitempty"`
}

// ReloadConfig is the data of a reload_config command.
type ReloadConfig struct {
	// Config is the newly composed config. Its session_id, when set, must
	// be the session's.
	Config *Config `json:"config"`
}

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
