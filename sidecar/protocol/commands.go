package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Command types a sidecar reads from agent:session:{<id>}:commands.
const (
	CommandSteeringMessage    = "steering_message"
	CommandAnswerQuestion     = "answer_question"
	CommandPlanDecision       = "plan_decision"
	CommandPermissionResponse = "permission_response"
	CommandRunValidation      = "run_validation"
)

// CommandTypes lists every command type, in the order README.md documents them.
var CommandTypes = slices.Concat(
	[]string{CommandSteeringMessage},
	ControlCommandTypes,
	[]string{CommandAnswerQuestion, CommandPlanDecision, CommandPermissionResponse, CommandRunValidation},
)

// Message priorities, named as the domain's MessagePriority values.
const (
	PriorityImmediate = "Immediate"
	PriorityQueued    = "Queued"
)

// Permission behaviors.
const (
	BehaviorAllow = "allow"
	BehaviorDeny  = "deny"
)

// SteeringMessage is the data of a steering_message command.
type SteeringMessage struct {
	// MessageID identifies the message; message_delivered echoes it.
	MessageID string `json:"message_id"`
	// Content is the text injected as the agent's input.
	Content string `json:"content"`
	// Priority is Immediate (interrupt the turn, inject next) or Queued
	// (inject after the current turn, in order).
	Priority string `json:"priority"`
}

// Validate reports missing fields and normalises the priority's case.
func (m *SteeringMessage) Validate() error {
	switch {
	case m.MessageID == "":
		return errors.New("message_id is required")
	case strings.TrimSpace(m.Content) == "":
		return errors.New("content is required")
	case strings.EqualFold(m.Priority, PriorityImmediate):
		m.Priority = PriorityImmediate
	case strings.EqualFold(m.Priority, PriorityQueued):
		m.Priority = PriorityQueued
	default:
		return fmt.Errorf("priority %q is neither Immediate nor Queued", m.Priority)
	}
	return nil
}

// AnswerQuestion is the data of an answer_question command.
type AnswerQuestion struct {
	// ToolUseID is the AskUserQuestion tool call being answered; empty
	// answers the one question the agent waits on.
	ToolUseID string `json:"tool_use_id,omitempty"`
	// Answer is the person's answer.
	Answer string `json:"answer"`
}

// Validate reports missing fields.
func (a AnswerQuestion) Validate() error {
	if a.Answer == "" {
		return errors.New("answer is required")
	}
	return nil
}

// PlanDecision is the data of a plan_decision command.
type PlanDecision struct {
	// ToolUseID is the ExitPlanMode tool call decided on; optional when
	// only one plan waits.
	ToolUseID string `json:"tool_use_id,omitempty"`
	// Approved says whether the plan is approved. Required.
	Approved *bool `json:"approved"`
	// Feedback tells the agent what to change when the plan is rejected.
	Feedback string `json:"feedback,omitempty"`
}

// Validate reports missing fields.
func (d PlanDecision) Validate() error {
	if d.Approved == nil {
		return errors.New("approved is required")
	}
	return nil
}

// PermissionResponse is the data of a permission_response command.
type PermissionResponse struct {
	// RequestID is the permission_request's request_id.
	RequestID string `json:"request_id"`
	// Behavior is allow or deny.
	Behavior string `json:"behavior"`
	// Message tells the agent why it was denied; optional.
	Message string `json:"message,omitempty"`
}

// Validate reports missing or wrong fields.
func (p PermissionResponse) Validate() error {
	switch {
	case p.RequestID == "":
		return errors.New("request_id is required")
	case p.Behavior != BehaviorAllow && p.Behavior != BehaviorDeny:
		return fmt.Errorf("behavior %q is neither allow nor deny", p.Behavior)
	}
	return nil
}

// DecodeData unmarshals a command's data into v, rejecting data that is
// not an object of the right shape.
func DecodeData(data json.RawMessage, v any) error {
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	return nil
}

// DefaultValidationTimeout bounds one check of a run_validation.
const DefaultValidationTimeout = 10 * time.Minute

// RunValidation is the data of a run_validation command: the checks of a
// session's auto-continue criteria. The sidecar runs them where the agent
// works, as the agent, and answers with validation_result.
type RunValidation struct {
	// Checks run in order, each with `sh -c` in the working directory.
	Checks []ValidationCheck `json:"checks"`
	// TimeoutMS bounds each check. Default 600000.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
}

// ValidationCheck is one check of a run_validation.
type ValidationCheck struct {
	// Name names the criterion the check is for, e.g. TestsPassing.
	Name string `json:"name"`
	// Command is the shell command line.
	Command string `json:"command"`
}

// Validate reports a run_validation that cannot be run.
func (v RunValidation) Validate() error {
	if len(v.Checks) == 0 {
		return errors.New("checks are required")
	}
	for i, c := range v.Checks {
		if strings.TrimSpace(c.Command) == "" {
			return fmt.Errorf("checks[%d].command is required", i)
		}
	}
	if v.TimeoutMS < 0 {
		return errors.New("timeout_ms is negative")
	}
	return nil
}

// Timeout returns the timeout of each check.
func (v RunValidation) Timeout() time.Duration {
	if v.TimeoutMS <= 0 {
		return DefaultValidationTimeout
	}
	return time.Duration(v.TimeoutMS) * time.Millisecond
}
