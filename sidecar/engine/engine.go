// Package engine is the boundary between the sidecar and what runs the
// agent. An Engine starts a Session; the sidecar drives the session turn by
// turn and the session talks back through a Host: it writes content events,
// stops at safe points while paused, and waits on the host for a person's
// answer, plan decision or tool permission.
//
// The sidecar owns everything engine-independent: the command loop, the
// acks, steering delivery, context monitoring, turn accounting and the
// session's end. An engine writes only content events (assistant_message,
// tool_result, subagent_message, usage_update, voluntary_handoff).
package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentbus/agentbus/sidecar/protocol"
)

// Engine starts agent sessions.
type Engine interface {
	// Start starts (or, with Config.ResumeEngineSessionID, resumes) the
	// engine's session. It must not run a turn.
	Start(ctx context.Context, s Setup, host Host) (Session, error)
}

// Session is one running agent.
type Session interface {
	// ID returns the engine's own session id, used to resume it.
	ID() string
	// Model returns the model the agent runs on.
	Model() string
	// Turn runs one turn on input and returns when the agent has answered.
	// When ctx is cancelled (interrupt, Immediate steering, stop, context
	// exhaustion) Turn stops as soon as it can, closes an open tool call
	// with an error tool_result, and returns; its error is then ignored.
	// Any other error fails the session; return a Failure to set its exit
	// code.
	Turn(ctx context.Context, in Input) (TurnResult, error)
	// Reload re-initialises the agent with a newly composed config,
	// keeping the conversation. It is called between turns only.
	Reload(ctx context.Context, cfg protocol.Config) error
	// Close releases the session (ends a child process, for example). The
	// sidecar calls it once, also after abandoning a stuck turn.
	Close() error
}

// Handoffer is implemented by a Session that can write its own handoff
// document when the context is exhausted. For other sessions the sidecar
// writes a generic one from the objective.
type Handoffer interface {
	// Handoff returns the document for the next session of the chain.
	Handoff(ctx context.Context) (protocol.HandoffDocument, error)
}

// Positioner is implemented by a Session that can tell where its
// conversation stands, so that a checkpoint can resume it there later
// (Config.ResumeAt).
type Positioner interface {
	// Position returns the conversation's position after the last turn.
	Position() string
}

// Transcriber is implemented by a Session whose conversation lives in a
// file of its own: the checkpoint keeps a copy, so that a fork (whose
// agent has another home) or a later rewind can resume it.
type Transcriber interface {
	// Transcript returns the conversation as the engine stores it, nil
	// when it has none yet.
	Transcript() ([]byte, error)
}

// Setup is what an engine needs to start a session.
type Setup struct {
	// SessionID is the agentbus session id.
	SessionID string
	// Config is the composed config, defaults set.
	Config protocol.Config
	// API is how the agent reaches the agent API (/api/agent/...).
	API AgentAPI
}

// AgentAPI tells the agent where the agent API is and with which key.
// Engines pass both to the agent process as AGENTBUS_API_URL and
// AGENTBUS_SESSION_KEY.
type AgentAPI struct {
	// URL is the API's base URL, e.g. http://127.0.0.1:8080; empty when
	// there is none (the agent then skips its API calls).
	URL string
	// Key is the session's agent API key, sent as the X-Agent-Key header.
	Key string
}

// Env returns the environment variables that carry a.
func (a AgentAPI) Env() []string {
	return []string{"AGENTBUS_API_URL=" + a.URL, "AGENTBUS_SESSION_KEY=" + a.Key}
}

// Input kinds.
const (
	// InputObjective is the first turn's input, the config's objective.
	InputObjective = "objective"
	// InputMessage is a delivered steering message.
	InputMessage = "message"
	// InputContinue lets the agent go on with its own work (after a
	// TurnResult with More, or after Immediate steering was answered).
	InputContinue = "continue"
)

// Input is what a turn answers.
type Input struct {
	// Kind is InputObjective, InputMessage or InputContinue.
	Kind string
	// Text is the objective or the message content.
	Text string
	// MessageID is the steering message's id.
	MessageID string
}

// TurnResult says how a turn ended.
type TurnResult struct {
	// More is true when the agent has more work of its own and wants
	// another turn without new input.
	More bool
}

// Host is the sidecar, seen from a session. Its methods are safe for
// concurrent use.
type Host interface {
	// Emit writes one content event. It fails after the session ended and
	// for event types the sidecar writes itself.
	Emit(ev protocol.Event) error
	// SafePoint returns at once unless the session is paused; then it
	// acknowledges the pause and blocks until resume or ctx ends. Engines
	// call it between steps (model calls, tool calls).
	SafePoint(ctx context.Context) error
	// CanUseTool decides whether a tool call may run. When the permission
	// policy asks for approval it writes a permission_request and waits for
	// the permission_response, denying when the policy's timeout passes.
	CanUseTool(ctx context.Context, req ToolRequest) (Permission, error)
	// AwaitAnswer waits for the answer_question of an AskUserQuestion call.
	AwaitAnswer(ctx context.Context, toolUseID string) (string, error)
	// AwaitPlanDecision waits for the plan_decision of an ExitPlanMode
	// call, or approves at once when the policy auto-approves plans.
	AwaitPlanDecision(ctx context.Context, toolUseID string) (PlanDecision, error)
}

// ToolRequest is a tool call asking to run.
type ToolRequest struct {
	// ToolUseID identifies the call.
	ToolUseID string
	// ToolName is the tool.
	ToolName string
	// Input is the call's input, a JSON object.
	Input json.RawMessage
	// SubagentID is set for a subagent's call.
	SubagentID string
	// AlwaysAsk asks for approval whatever the policy says.
	AlwaysAsk bool
}

// Permission is the decision on a tool call.
type Permission struct {
	// Allow is true when the call may run.
	Allow bool
	// Message explains a denial to the agent.
	Message string
}

// PlanDecision is a person's decision on a plan.
type PlanDecision struct {
	// Approved is true when the plan is approved.
	Approved bool
	// Feedback says what to change when it is not.
	Feedback string
}

// Failure is an engine error that fails the session with an exit code.
type Failure struct {
	// Message describes the failure.
	Message string
	// ExitCode is the agent's exit code; 0 becomes 1.
	ExitCode int
}

// Error returns the message.
func (f *Failure) Error() string { return f.Message }

// ExitCodeOf returns the exit code of a session failed by err.
func ExitCodeOf(err error) int {
	var f *Failure
	if errors.As(err, &f) && f.ExitCode != 0 {
		return f.ExitCode
	}
	return 1
}

// ErrUnknownEngine is returned for an engine name no registry holds.
var ErrUnknownEngine = errors.New("unknown engine")

// Registry maps engine names to engines.
type Registry map[string]Engine

// Get returns the engine called name.
func (r Registry) Get(name string) (Engine, error) {
	if e, ok := r[name]; ok {
		return e, nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownEngine, name)
}
