package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/command/control"
	"github.com/agentbus/agentbus/domain"
)

// simpleCommand is a session command that takes nothing but the session.
type simpleCommand struct {
	op, path, summary, description, command string
}

// simpleCommands are the lifecycle commands without parameters besides
// the two-phase controls, whose routes come from control.All(). Each
// answers the session's new state, or 409 with its current status when
// the status forbids the command.
var simpleCommands = []simpleCommand{
	{"approve-session", "approve", "Approve a session's output",
		"Accepts the output awaiting review (Idle with hasPendingReview -> Completed).", command.ApproveOutput},
	{"close-session", "close", "Close an idle session",
		"Ends an Idle session that has no output awaiting review (-> Completed).", command.CloseSession},
	{"approve-plan", "plan/approve", "Approve a session's plan",
		"Approves the plan awaiting approval (WaitingForApproval -> Running).", command.ApprovePlan},
}

// RejectOutputRequest rejects a session's output.
type RejectOutputRequest struct {
	Reason string `json:"reason,omitempty" maxLength:"4000" doc:"Why the output is rejected." example:"The retries must not apply to POST requests."`
}

// RetryRequest retries a failed session.
type RetryRequest struct {
	AdditionalInstruction string `json:"additionalInstruction,omitempty" maxLength:"2000" doc:"An extra instruction for the new attempt." example:"Run the linter before finishing."`
}

// AnswerRequest answers the question a session waits on.
type AnswerRequest struct {
	Answer string `json:"answer" minLength:"1" maxLength:"4000" doc:"The answer to the agent's question." example:"Yes, but only for idempotent requests."`
}

// RejectPlanRequest rejects a session's plan.
type RejectPlanRequest struct {
	Feedback string `json:"feedback" minLength:"1" maxLength:"4000" doc:"What to change in the plan." example:"Keep the public API unchanged."`
}

// RaiseBudgetRequest raises a session's spending cap.
type RaiseBudgetRequest struct {
	HardCapUsd float64 `json:"hardCapUsd" exclusiveMinimum:"0" maximum:"1000000" doc:"The new cap, in US dollars; more than the current one." example:"25"`
}

type rejectOutputInput struct {
	ID   string `path:"id" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	Body *RejectOutputRequest
}

type retryInput struct {
	ID   string `path:"id" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	Body *RetryRequest
}

type answerInput struct {
	ID   string `path:"id" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	Body AnswerRequest
}

type rejectPlanInput struct {
	ID   string `path:"id" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	Body RejectPlanRequest
}

type raiseBudgetInput struct {
	ID   string `path:"id" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	Body RaiseBudgetRequest
}

// addSessionControlRoutes registers the commands that steer a session's
// lifecycle.
func (s *Server) addSessionControlRoutes(api huma.API) {
	for _, c := range control.All() {
		simple := simpleCommand{c.Route.OperationID, c.Route.Path, c.Route.Summary, c.Route.Description, c.Request}
		s.addSimpleCommand(api, simple)
	}
	for _, c := range simpleCommands {
		s.addSimpleCommand(api, c)
	}
	register(api, humanOp("reject-session", http.MethodPost, "/api/agents/sessions/{id}/reject", "Reject a session's output",
		"Rejects the output awaiting review (Idle with hasPendingReview -> Failed); the session may be retried.", "Session control", commandErrors),
		func(ctx context.Context, in *rejectOutputInput) (*sessionOutput, error) {
			var data command.ReasonData
			if in.Body != nil {
				data.Reason = in.Body.Reason
			}
			return s.sessionCommand(ctx, in.ID, command.RejectOutput, data, nil)
		})
	register(api, humanOp("retry-session", http.MethodPost, "/api/agents/sessions/{id}/retry", "Retry a failed session",
		"Queues a Failed session again (-> Queued), at most three times.", "Session control", commandErrors),
		func(ctx context.Context, in *retryInput) (*sessionOutput, error) {
			var data command.RetryData
			if in.Body != nil {
				data.AdditionalInstruction = in.Body.AdditionalInstruction
			}
			return s.sessionCommand(ctx, in.ID, command.RetrySession, data, nil)
		})
	register(api, humanOp("answer-session", http.MethodPost, "/api/agents/sessions/{id}/answer", "Answer a session's question",
		"Answers the question the agent asked (WaitingForInput -> Running).", "Session control", commandErrors),
		func(ctx context.Context, in *answerInput) (*sessionOutput, error) {
			return s.sessionCommand(ctx, in.ID, command.AnswerQuestion, command.AnswerData{Answer: in.Body.Answer}, nil)
		})
	register(api, humanOp("reject-plan", http.MethodPost, "/api/agents/sessions/{id}/plan/reject", "Reject a session's plan",
		"Rejects the plan awaiting approval with feedback (WaitingForApproval -> Running); the agent revises it.", "Session control", commandErrors),
		func(ctx context.Context, in *rejectPlanInput) (*sessionOutput, error) {
			return s.sessionCommand(ctx, in.ID, command.RejectPlan, command.FeedbackData{Feedback: in.Body.Feedback}, nil)
		})
	register(api, humanOp("raise-session-budget", http.MethodPost, "/api/agents/sessions/{id}/budget", "Raise a session's budget",
		"Raises the session's spending cap; a session paused because its cap was spent may then be resumed.", "Session control", commandErrors),
		func(ctx context.Context, in *raiseBudgetInput) (*sessionOutput, error) {
			amount, err := domain.USDFromFloat(in.Body.HardCapUsd)
			if err != nil {
				return nil, NewKindError(KindValidation, "hardCapUsd must be a finite amount").WithField("hardCapUsd")
			}
			return s.sessionCommand(ctx, in.ID, command.RaiseBudget, command.BudgetData{HardCapUsd: amount},
				map[string]string{"budget.hardCapUsd": "hardCapUsd"})
		})
}

// addSimpleCommand registers the route of a command that takes nothing
// but the session.
func (s *Server) addSimpleCommand(api huma.API, c simpleCommand) {
	name := c.command
	register(api, humanOp(c.op, http.MethodPost, "/api/agents/sessions/{id}/"+c.path, c.summary, c.description, "Session control", commandErrors),
		func(ctx context.Context, in *sessionIDInput) (*sessionOutput, error) {
			return s.sessionCommand(ctx, in.ID, name, nil, nil)
		})
}

// sessionCommand sends a session command for the caller and answers the
// session's new state.
func (s *Server) sessionCommand(ctx context.Context, rawID, name string, data any, fields map[string]string) (*sessionOutput, error) {
	id, err := parseID("path.id", rawID)
	if err != nil {
		return nil, err
	}
	raw, err := s.send(ctx, domain.AggregateSession, name, id, data, fields)
	if err != nil {
		return nil, err
	}
	snap, err := decodeState[domain.AgentSessionSnapshot](raw)
	if err != nil {
		return nil, err
	}
	out := &sessionOutput{Body: s.sessionDetail(snap)}
	if err := s.withWaitingFor(ctx, snap, &out.Body); err != nil {
		return nil, err
	}
	return out, nil
}
