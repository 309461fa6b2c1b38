// Package control declares the session's two-phase controls once. A
// control is asked for with a command, which moves the session to an
// intermediate status and raises a "requested" event; the sidecar-dispatch
// reaction turns that event into a sidecar command; the sidecar answers
// with an ack echoing the command's id; the ACL turns the ack into the
// confirming command, which moves the session to its final status.
//
// Every piece of that chain is named in one Control row, and the code
// that wires a piece is built from the rows rather than listing the
// controls again: the HTTP routes (api), the request and confirm handlers
// (handlers/commands), the requested-event -> sidecar-command mapping
// (handlers/reactions), the ack -> confirm mapping (handlers/acl), and
// the raw types the relay accepts (sidecar/protocol.EventTypes, which the
// rows are checked against). The sidecar, a separate program that does
// not depend on the control plane, is checked against the rows by its
// tests.
//
// The package sits between the two vocabularies it joins: it imports
// domain (the session's methods and events) and the contracts (command,
// sidecar/protocol), and neither imports it, so domain stays pure and the
// sidecar's protocol stays free of the control plane. The rows are checked
// when the package is initialised: an incomplete or inconsistent row stops
// every program and test that uses it.
//
// A new control, say compact answered by compact_ack, is written in seven
// files and wired by none:
//
//   - command/control/controls.go: its row.
//   - command/sessions.go: its request and confirm command names.
//   - domain/session_compact.go (as domain/session_pause.go is pause's):
//     the session's RequestCompact and ConfirmCompacted, with their
//     operations, sidecar command name and events declared beside them,
//     and the control's slice of the session's tables (its moves and its
//     events with their statuses).
//   - domain/session_control.go: that slice in the list of controls.
//   - sidecar/protocol/controls.go: the command's data and the ack, their
//     types, and both in ControlCommandTypes and AckTypes.
//   - sidecar/commands.go: the sidecar's handler, in commandHandlers.
//   - sidecar/README.md: the command and the ack, with an example each.
//
// What the engine does to compact is the engine's own code besides.
package control

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// Control is one two-phase control of a session.
type Control struct {
	// Name names the control in messages: pause.
	Name string
	// Request is the command that asks for the control (pause_session).
	Request string
	// RequestOp is the session method the request calls.
	RequestOp func(*domain.AgentSession, time.Time) error
	// RequestForced, when set, is the method a request with force set
	// calls instead (cancel: the agent is stopped at once). Nil for a
	// control that cannot be forced.
	RequestForced func(*domain.AgentSession, time.Time) error
	// Requested is the event the request raises; its JSON data names the
	// awaited sidecar command's id as commandId.
	Requested domain.Event
	// Sidecar is the command the requested event becomes for the sidecar.
	Sidecar domain.SidecarCommand
	// SidecarData returns the sidecar command's data, given the requested
	// event's JSON data. Nil when the sidecar-dispatch reaction composes
	// the data itself from the session (reload_config carries the newly
	// composed config).
	SidecarData func(requested json.RawMessage) (any, error)
	// Ack is the raw event with which the sidecar acknowledges the command.
	Ack protocol.Event
	// Acked is the summary of the activity item of a confirmed ack.
	Acked string
	// Confirm is the command the ack becomes (confirm_paused).
	Confirm string
	// ConfirmOp is the session method the confirm calls.
	ConfirmOp func(*domain.AgentSession, uuid.UUID, time.Time) error
	// Route is the HTTP operation that sends Request.
	Route Route
}

// Route is the HTTP operation of a control: POST /api/agents/sessions/{id}/<Path>.
type Route struct {
	// OperationID is the OpenAPI operation id (pause-session).
	OperationID string
	// Path is the last segment of the route (pause).
	Path string
	// Summary is the operation's one-line summary.
	Summary string
	// Description is the operation's description: the moves it makes.
	Description string
}

// controls are the rows.
var controls = []Control{
	{
		Name: "interrupt", Request: command.InterruptSession, RequestOp: (*domain.AgentSession).RequestInterrupt,
		Requested: domain.SessionInterruptRequestedEvent{},
		Sidecar:   domain.SidecarInterrupt, SidecarData: fixed(protocol.Interrupt{}),
		Ack: protocol.InterruptAck{}, Acked: "Interrupted",
		Confirm: command.ConfirmInterrupted, ConfirmOp: (*domain.AgentSession).ConfirmInterrupted,
		Route: Route{"interrupt-session", "interrupt", "Interrupt a session",
			"Stops the running turn (Running -> Interrupting; Interrupted once the agent acknowledges). A follow-up message starts the next turn."},
	},
	{
		Name: "pause", Request: command.PauseSession, RequestOp: (*domain.AgentSession).RequestPause,
		Requested: domain.SessionPauseRequestedEvent{},
		Sidecar:   domain.SidecarPause, SidecarData: fixed(protocol.Pause{}),
		Ack: protocol.PauseAck{}, Acked: "Paused",
		Confirm: command.ConfirmPaused, ConfirmOp: (*domain.AgentSession).ConfirmPaused,
		Route: Route{"pause-session", "pause", "Pause a session",
			"Suspends a running session (Running -> Pausing; Paused once the agent acknowledges)."},
	},
	{
		Name: "resume", Request: command.ResumeSession, RequestOp: (*domain.AgentSession).RequestResume,
		Requested: domain.SessionResumeRequestedEvent{},
		Sidecar:   domain.SidecarResume, SidecarData: fixed(protocol.Resume{}),
		Ack: protocol.ResumeAck{}, Acked: "Resumed",
		Confirm: command.ConfirmResumed, ConfirmOp: (*domain.AgentSession).ConfirmResumed,
		Route: Route{"resume-session", "resume", "Resume a session",
			"Resumes a paused session (Paused -> Resuming; Running once the agent acknowledges)."},
	},
	{
		Name: "cancel", Request: command.CancelSession, RequestOp: (*domain.AgentSession).RequestCancel,
		RequestForced: (*domain.AgentSession).RequestForceCancel,
		Requested:     domain.SessionCancelRequestedEvent{},
		Sidecar:       domain.SidecarStop, SidecarData: stopData,
		Ack: protocol.StopAck{}, Acked: "Stopped",
		Confirm: command.ConfirmCancelled, ConfirmOp: (*domain.AgentSession).ConfirmCancelled,
		Route: Route{"cancel-session", "cancel", "Cancel a session",
			"Stops the session for good (-> Cancelling; Cancelled once the agent stopped). A Queued session is Cancelled at once."},
	},
	{
		Name: "reload", Request: command.ReloadSession, RequestOp: (*domain.AgentSession).RequestReload,
		Requested: domain.SessionReloadRequestedEvent{},
		Sidecar:   domain.SidecarReload, // data composed by the sidecar-dispatch reaction
		Ack:       protocol.ReloadConfigAck{}, Acked: "Configuration reloaded",
		Confirm: command.ConfirmReloaded, ConfirmOp: (*domain.AgentSession).ConfirmReloaded,
		Route: Route{"reload-session", "reload", "Reload a session's configuration",
			"Asks the agent to reload its composed configuration after a skill change (Idle or Interrupted)."},
	},
}

// fixed is the SidecarData of a command whose data does not depend on its
// request.
func fixed(data any) func(json.RawMessage) (any, error) {
	return func(json.RawMessage) (any, error) { return data, nil }
}

// stopData carries a forced cancel's force to the sidecar's stop.
func stopData(requested json.RawMessage) (any, error) {
	var e domain.SessionCancelRequestedEvent
	if err := json.Unmarshal(requested, &e); err != nil {
		return nil, err
	}
	return protocol.Stop{Force: e.Force}, nil
}

// Indexes of the rows by the names the wiring looks them up by.
var (
	byRequested = map[string]Control{}
	byAck       = map[string]Control{}
)

func init() {
	if err := Check(controls); err != nil {
		panic(err)
	}
	for name := range help {
		if !slices.ContainsFunc(controls, func(c Control) bool { return c.Name == name }) {
			panic("control: help for no control " + name)
		}
	}
	for _, c := range controls {
		byRequested[c.Requested.EventType()] = c
		byAck[c.Ack.EventType()] = c
	}
}

// All returns every control, in the order of the table.
func All() []Control { return append([]Control(nil), controls...) }

// help is the one line `agentbus sessions <name> ID` shows, by the name of
// each control people ask for themselves: the CLI and the WebSocket door
// offer these. The others follow from another request (a reload, from a
// skill change).
var help = map[string]string{
	"interrupt": "interrupt the running turn",
	"pause":     "pause a running session (Pausing, then Paused)",
	"resume":    "resume a paused session (Resuming, then Running)",
	"cancel":    "cancel a session",
}

// Offered returns the controls people ask for themselves, in the order of
// the table.
func Offered() []Control {
	var offered []Control
	for _, c := range controls {
		if help[c.Name] != "" {
			offered = append(offered, c)
		}
	}
	return offered
}

// Help returns the one line that describes the control to people.
func Help(c Control) string { return help[c.Name] }

// ByRequested returns the control whose requested event has the type typ.
func ByRequested(typ string) (Control, bool) {
	c, ok := byRequested[typ]
	return c, ok
}

// ByAck returns the control whose ack has the raw event type typ.
func ByAck(typ string) (Control, bool) {
	c, ok := byAck[typ]
	return c, ok
}
