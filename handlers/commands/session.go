package commands

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/command/control"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
)

// Clock returns the current time; tests may fix it.
type Clock func() time.Time

var sessions postgres.Sessions

// decode reads a command's parameters into T; empty data is T's zero value.
func decode[T any](cmd command.Command) (T, error) {
	var in T
	if len(cmd.Data) == 0 || string(cmd.Data) == "null" {
		return in, nil
	}
	if err := json.Unmarshal(cmd.Data, &in); err != nil {
		return in, badData{err}
	}
	return in, nil
}

// onSession adapts one domain operation on a session into a Handler: it
// decodes the parameters, loads the session (hiding another owner's),
// applies the operation and saves the session with its events.
func onSession[T any](now Clock, apply func(s *domain.AgentSession, in T, at time.Time) error) Handler {
	return func(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
		in, err := decode[T](cmd)
		if err != nil {
			return nil, err
		}
		s, err := sessions.Update(ctx, tx, cmd.AggregateID, func(s *domain.AgentSession) error {
			if err := checkOwner(cmd, s.OwnerID().String(), "session"); err != nil {
				return err
			}
			return apply(s, in, now().UTC())
		})
		if err != nil {
			return nil, err
		}
		return SessionState(s), nil
	}
}

// ownSession loads the session id for cmd; another owner's session is
// refused as if it did not exist.
func ownSession(ctx context.Context, tx pgx.Tx, cmd command.Command, id uuid.UUID) (*domain.AgentSession, error) {
	s, err := sessions.Get(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	if err := checkOwner(cmd, s.OwnerID().String(), "session"); err != nil {
		return nil, err
	}
	return s, nil
}

// checkOwner refuses a person's command on another owner's aggregate as if
// it did not exist. Internal commands carry no owner.
func checkOwner(cmd command.Command, owner, what string) error {
	if cmd.OwnerID != "" && cmd.OwnerID != owner {
		return notOwner{what}
	}
	return nil
}

// SessionState is the summary a session command returns once it saved
// the session: its state without the API key hashes, at the version the
// save stored (one more than the version it was loaded at).
func SessionState(s *domain.AgentSession) domain.AgentSessionSnapshot {
	snap := s.Snapshot()
	snap.APIKeyHash, snap.SidecarKeyHash = "", ""
	snap.Version++
	return snap
}

type none struct{}

// registerSession adds every command of the session aggregate.
func registerSession(d *Dispatcher, now Clock) {
	simple := map[string]func(*domain.AgentSession, time.Time) error{
		command.ApproveOutput:          (*domain.AgentSession).ApproveOutput,
		command.CloseSession:           (*domain.AgentSession).Close,
		command.ApprovePlan:            (*domain.AgentSession).RecordPlanApproved,
		command.BeginTurn:              (*domain.AgentSession).BeginTurn,
		command.RecordTurnCompleted:    (*domain.AgentSession).RecordTurnCompleted,
		command.RecordContextExhausted: (*domain.AgentSession).RecordContextExhausted,
		command.ExpireTimeouts:         (*domain.AgentSession).ExpireTimeouts,
		command.RecordAutoContinuation: (*domain.AgentSession).RecordAutoContinuation,
		command.StopAutoContinuation:   (*domain.AgentSession).StopAutoContinuation,
	}
	reg := func(name string, h Handler) { d.Register(domain.AggregateSession, name, h) }
	// The two-phase controls: a request, and the confirm its ack becomes.
	for _, c := range control.All() {
		if c.RequestForced != nil {
			op, forced := c.RequestOp, c.RequestForced
			reg(c.Request, onSession(now, func(s *domain.AgentSession, in command.CancelData, at time.Time) error {
				if in.Force {
					return forced(s, at)
				}
				return op(s, at)
			}))
		} else {
			simple[c.Request] = c.RequestOp
		}
		confirm := c.ConfirmOp
		reg(c.Confirm, onSession(now, func(s *domain.AgentSession, in command.AckData, at time.Time) error {
			return confirm(s, in.CommandID, at)
		}))
	}
	for name, op := range simple {
		d.Register(domain.AggregateSession, name, onSession(now, func(s *domain.AgentSession, _ none, at time.Time) error {
			return op(s, at)
		}))
	}
	reg(command.StartSession, startSession(now))
	reg(command.RejectOutput, onSession(now, func(s *domain.AgentSession, in command.ReasonData, at time.Time) error {
		return s.RejectOutput(in.Reason, at)
	}))
	reg(command.RewindSession, onSession(now, func(s *domain.AgentSession, in command.RewindData, at time.Time) error {
		return s.Rewind(in.Turn, at)
	}))
	reg(command.RetrySession, onSession(now, func(s *domain.AgentSession, in command.RetryData, at time.Time) error {
		return s.Retry(in.AdditionalInstruction, at)
	}))
	reg(command.AnswerQuestion, onSession(now, func(s *domain.AgentSession, in command.AnswerData, at time.Time) error {
		return s.RecordUserQuestionAnswered(in.Answer, at)
	}))
	reg(command.RejectPlan, onSession(now, func(s *domain.AgentSession, in command.FeedbackData, at time.Time) error {
		return s.RecordPlanRejected(in.Feedback, at)
	}))
	reg(command.DisableSkill, onSession(now, func(s *domain.AgentSession, in command.SkillData, at time.Time) error {
		return s.DisableSkill(in.SkillID, at)
	}))
	reg(command.RaiseBudget, onSession(now, func(s *domain.AgentSession, in command.BudgetData, at time.Time) error {
		return s.RaiseBudget(in.HardCapUsd, at)
	}))
	reg(command.AllowPermission, onSession(now, func(s *domain.AgentSession, in command.PermissionDecisionData, at time.Time) error {
		return s.ApproveToolPermission(in.RequestID, in.Message, at)
	}))
	reg(command.DenyPermission, onSession(now, func(s *domain.AgentSession, in command.PermissionDecisionData, at time.Time) error {
		return s.DenyToolPermission(in.RequestID, in.Message, at)
	}))
	reg(command.RecordAgentOutput, onSession(now, func(s *domain.AgentSession, in command.OutputData, at time.Time) error {
		return s.RecordOutput(in.Output, at)
	}))
	reg(command.RecordContextNearingLimit, onSession(now, func(s *domain.AgentSession, in command.UsageData, at time.Time) error {
		return s.RecordContextNearingLimit(in.UsagePercent, at)
	}))
	reg(command.RecordQuestionAsked, onSession(now, func(s *domain.AgentSession, in command.QuestionData, at time.Time) error {
		return s.RecordUserQuestionAsked(in.Content, in.Options, at)
	}))
	reg(command.RecordPlanCreated, onSession(now, func(s *domain.AgentSession, in command.PlanData, at time.Time) error {
		return s.RecordPlanCreated(in.Content, at)
	}))
	reg(command.RecordPlanPending, onSession(now, func(s *domain.AgentSession, in command.PlanData, at time.Time) error {
		return s.RecordPlanPendingApproval(in.Content, in.RequiresApproval, at)
	}))
	reg(command.UpdateTaskList, onSession(now, func(s *domain.AgentSession, in command.TaskListData, at time.Time) error {
		return s.UpdateSessionTaskList(in.Tasks, at)
	}))
	reg(command.RecordVoluntaryHandoff, onSession(now, func(s *domain.AgentSession, in command.HandoffData, at time.Time) error {
		return s.RecordVoluntaryHandoff(in.Reason, in.Summary, in.RemainingWork, at)
	}))
	reg(command.RecordFailure, onSession(now, func(s *domain.AgentSession, in command.FailureData, at time.Time) error {
		return s.RecordFailure(in.Reason, in.Message, at)
	}))
	reg(command.FailHandoff, onSession(now, func(s *domain.AgentSession, in command.ReasonData, at time.Time) error {
		return s.FailHandoff(in.Reason, at)
	}))
	reg(command.UpdateMetrics, onSession(now, func(s *domain.AgentSession, in command.MetricsData, at time.Time) error {
		return s.UpdateMetrics(domain.MetricsUpdate{SubAgentID: in.SubAgentID, ModelID: in.ModelID,
			Cost: in.CostUsd, Tokens: in.Tokens, ContextWindow: in.ContextWindow}, at)
	}))
	reg(command.RequestPermission, onSession(now, func(s *domain.AgentSession, in command.PermissionRequestData, at time.Time) error {
		_, err := s.RequestToolPermission(in.RequestID, in.ToolName, in.Input, at)
		return err
	}))
}

// parseOwner reads the owner of a command that creates an aggregate.
func parseOwner(cmd command.Command) (uuid.UUID, error) {
	owner, err := uuid.Parse(cmd.OwnerID)
	if err != nil {
		return uuid.Nil, &domain.ValidationError{FieldName: "ownerId", Message: "must be a UUID"}
	}
	return owner, nil
}
