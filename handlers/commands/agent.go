package commands

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
)

// registerAgent adds the commands of the agent API.
func registerAgent(d *Dispatcher, now Clock) {
	d.Register(domain.AggregateSession, command.CreateAgentTask, createAgentTask(now))
	d.Register(domain.AggregateSession, command.HandOff, handOff(now))
	d.Register(domain.AggregateSkill, command.RecordAgentMemoryPill, recordAgentMemoryPill(now))
}

// createAgentTask records the follow-up task a running agent creates. The
// task's id is derived from the command id, so a repeated command names
// the same task and the task context creates it once.
func createAgentTask(now Clock) Handler {
	return func(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
		in, err := decode[command.AgentTaskData](cmd)
		if err != nil {
			return nil, err
		}
		task, err := agentTask(in)
		if err != nil {
			return nil, err
		}
		taskID := uuid.NewSHA1(cmd.ID, []byte("agent_task"))
		s, err := sessions.Update(ctx, tx, cmd.AggregateID, func(s *domain.AgentSession) error {
			if err := checkOwner(cmd, s.OwnerID().String(), "session"); err != nil {
				return err
			}
			return s.RecordAPITaskCreated(taskID, domain.APITask{Title: task.Title, Description: task.Description,
				Priority: task.Priority, Tags: task.Tags, LinkedTaskID: task.LinkedTaskID}, now().UTC())
		})
		if err != nil {
			return nil, err
		}
		return command.AgentTaskResult{TaskID: taskID, SessionID: s.ID(), Task: task}, nil
	}
}

// agentTask validates a follow-up task and returns it trimmed, its
// priority defaulting to Medium.
func agentTask(in command.AgentTaskData) (command.AgentTaskData, error) {
	title, err := trimmedText("title", in.Title, 1, command.MaxTaskTitleChars)
	if err != nil {
		return in, err
	}
	description, err := trimmedText("description", in.Description, 0, command.MaxTaskDescriptionChars)
	if err != nil {
		return in, err
	}
	priority := in.Priority
	if priority == "" {
		priority = command.TaskPriorityMedium
	}
	if !slices.Contains([]string{command.TaskPriorityLow, command.TaskPriorityMedium, command.TaskPriorityHigh, command.TaskPriorityUrgent}, priority) {
		return in, &domain.ValidationError{FieldName: "priority", Message: fmt.Sprintf("must be Low, Medium, High or Urgent, not %q", priority)}
	}
	if len(in.Tags) > command.MaxTaskTags {
		return in, &domain.ValidationError{FieldName: "tags", Message: fmt.Sprintf("must be at most %d tags", command.MaxTaskTags)}
	}
	var tags []string
	for i, t := range in.Tags {
		tag, err := trimmedText(fmt.Sprintf("tags[%d]", i), t, 1, command.MaxTaskTagChars)
		if err != nil {
			return in, err
		}
		if !slices.Contains(tags, tag) {
			tags = append(tags, tag)
		}
	}
	if in.LinkedTaskID != nil && *in.LinkedTaskID == uuid.Nil {
		return in, &domain.ValidationError{FieldName: "linkedTaskId", Message: "must be a task id"}
	}
	return command.AgentTaskData{Title: title, Description: description, Priority: priority, Tags: tags, LinkedTaskID: in.LinkedTaskID}, nil
}

// trimmedText trims s and checks its length in characters.
func trimmedText(field, s string, lo, hi int) (string, error) {
	t := strings.TrimSpace(s)
	switch n := utf8.RuneCountInString(t); {
	case n < lo:
		return "", &domain.ValidationError{FieldName: field, Message: "must not be empty"}
	case n > hi:
		return "", &domain.ValidationError{FieldName: field, Message: fmt.Sprintf("must be at most %d characters, not %d", hi, n)}
	}
	return t, nil
}

// handOff stops the running session for a voluntary handoff and gives its
// document to the session's chain, creating the chain (command.ChainIDFor)
// when the session has none. Both happen in one transaction, so a refused
// document (too long key decisions, a handoff already waiting) leaves the
// session running. The document's id is derived from the command id, as
// InitiateHandoff derives it.
func handOff(now Clock) Handler {
	return func(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
		in, err := decode[command.HandOffData](cmd)
		if err != nil {
			return nil, err
		}
		s, err := ownSession(ctx, tx, cmd, cmd.AggregateID)
		if err != nil {
			return nil, err
		}
		at := now().UTC()
		if err := s.RecordVoluntaryHandoff(in.Reason, in.Summary, in.RemainingWork, at); err != nil {
			return nil, err
		}
		docID := uuid.NewSHA1(cmd.ID, []byte("handoff_document"))
		var doc domain.HandoffDocument
		write := func(c *domain.SessionChain) (err error) {
			doc, err = c.InitiateHandoff(docID, s.ID(), in.Summary, in.RemainingWork, in.KeyDecisions, at)
			return err
		}
		if id := s.ChainID(); id != nil {
			if err := sessions.Save(ctx, tx, s); err != nil {
				return nil, err
			}
			if _, err := chains.Update(ctx, tx, *id, write); err != nil {
				return nil, err
			}
		} else if err := handOffToNewChain(ctx, tx, s, write, at); err != nil {
			return nil, err
		}
		return command.HandOffResult{Session: SessionState(s), HandoffDocument: doc}, nil
	}
}

func handOffToNewChain(ctx context.Context, tx pgx.Tx, s *domain.AgentSession, write func(*domain.SessionChain) error, at time.Time) error {
	c, err := domain.NewSessionChain(command.ChainIDFor(s.ID()), s.OwnerID(), s.Objective(), s.ID(), at)
	if err != nil {
		return err
	}
	if err := write(c); err != nil {
		return err
	}
	return startChain(ctx, tx, s, c, at)
}

// skillNotEnabled refuses an agent's command on a skill its session does
// not have enabled: an agent reaches only the skills it was given.
type skillNotEnabled struct{ id uuid.UUID }

func (e skillNotEnabled) Error() string {
	return fmt.Sprintf("skill %s is not enabled on the agent's session", e.id)
}
func (e skillNotEnabled) Kind() string { return command.KindForbidden }

// recordAgentMemoryPill records a running agent's learning on one of the
// skills enabled on its session, then as RecordMemoryPill does.
func recordAgentMemoryPill(now Clock) Handler {
	record := recordMemoryPill(now)
	return func(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
		in, err := decode[command.RecordMemoryPillData](cmd)
		if err != nil {
			return nil, err
		}
		if err := required("sessionId", in.SessionID); err != nil {
			return nil, err
		}
		s, err := ownSession(ctx, tx, cmd, in.SessionID)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(s.EnabledSkillIDs(), cmd.AggregateID) {
			return nil, skillNotEnabled{cmd.AggregateID}
		}
		if s.Status() != domain.StatusRunning {
			return nil, &domain.TransitionError{Aggregate: "AgentSession", Operation: "RecordMemoryPill",
				Status: string(s.Status()), Reason: domain.ErrInvalidTransition}
		}
		return record(ctx, tx, cmd)
	}
}
