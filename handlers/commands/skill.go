package commands

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
)

var skills postgres.Skills

// skillOp is one operation on a loaded skill.
type skillOp[T any] func(ctx context.Context, tx pgx.Tx, sk *domain.AgentSkill, in T, at time.Time) error

// onSkill adapts one operation on a skill into a Handler: decode, load
// (hiding another owner's skill), apply, save with the events.
func onSkill[T any](now Clock, apply skillOp[T]) Handler {
	return func(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
		sk, err := updateSkill(ctx, tx, now, cmd, apply)
		if err != nil {
			return nil, err
		}
		return skillState(sk), nil
	}
}

func updateSkill[T any](ctx context.Context, tx pgx.Tx, now Clock, cmd command.Command, apply skillOp[T]) (*domain.AgentSkill, error) {
	in, err := decode[T](cmd)
	if err != nil {
		return nil, err
	}
	return skills.Update(ctx, tx, cmd.AggregateID, func(sk *domain.AgentSkill) error {
		if err := checkOwner(cmd, sk.OwnerID().String(), "skill"); err != nil {
			return err
		}
		return apply(ctx, tx, sk, in, now().UTC())
	})
}

func registerSkill(d *Dispatcher, now Clock) {
	reg := func(name string, h Handler) { d.Register(domain.AggregateSkill, name, h) }
	reg(command.CreateSkill, createSkill(now))
	reg(command.UpdateSkill, onSkill(now, updateSkillDetails))
	reg(command.ActivateSkill, onSkill(now, func(_ context.Context, _ pgx.Tx, sk *domain.AgentSkill, _ none, at time.Time) error {
		return sk.Activate(at)
	}))
	reg(command.DeactivateSkill, onSkill(now, func(_ context.Context, _ pgx.Tx, sk *domain.AgentSkill, _ none, at time.Time) error {
		return sk.Deactivate(at)
	}))
	reg(command.DismissMemoryPill, onSkill(now, func(_ context.Context, _ pgx.Tx, sk *domain.AgentSkill, in command.PillData, at time.Time) error {
		return sk.DismissMemoryPill(in.PillID, at)
	}))
	reg(command.ConsolidateSkill, onSkill(now, func(_ context.Context, _ pgx.Tx, sk *domain.AgentSkill, in command.ConsolidateSkillData, at time.Time) error {
		return sk.ConsolidateMemoryPills(in.PillIDs, in.UpdatedInstructions, at)
	}))
	reg(command.RecordMemoryPill, recordMemoryPill(now))
}

// createSkill creates an active skill whose name the owner does not use yet.
func createSkill(now Clock) Handler {
	return func(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
		in, err := decode[command.CreateSkillData](cmd)
		if err != nil {
			return nil, err
		}
		owner, err := parseOwner(cmd)
		if err != nil {
			return nil, err
		}
		tools, err := toolDefinitions("toolDefinitions", in.ToolDefinitions)
		if err != nil {
			return nil, err
		}
		subs, err := subAgentDefinitions(in.SubAgentDefinitions)
		if err != nil {
			return nil, err
		}
		sk, err := domain.NewAgentSkill(cmd.AggregateID, owner, in.Name, in.Description, in.Instructions, tools, subs, now().UTC())
		if err != nil {
			return nil, err
		}
		if err := requireFreeName(ctx, tx, sk); err != nil {
			return nil, err
		}
		if err := created(skills.Add(ctx, tx, sk), "AgentSkill", sk.ID()); err != nil {
			return nil, err
		}
		return skillState(sk), nil
	}
}

// requireFreeName refuses a skill name the owner uses for another skill
// (ignoring case). The owner's catalog lock keeps two commands from
// taking one name at once.
func requireFreeName(ctx context.Context, tx pgx.Tx, sk *domain.AgentSkill) error {
	if err := postgres.LockCatalog(ctx, tx, "skills", sk.OwnerID()); err != nil {
		return err
	}
	taken, err := skills.NameTaken(ctx, tx, sk.OwnerID(), sk.Name(), sk.ID())
	if err != nil {
		return err
	}
	if taken {
		return nameTaken{sk.Name()}
	}
	return nil
}

// updateSkillDetails renames, re-describes or edits the instructions of
// a skill; a manual edit of the instructions keeps the skill's version.
func updateSkillDetails(ctx context.Context, tx pgx.Tx, sk *domain.AgentSkill, in command.UpdateSkillData, at time.Time) error {
	if in.Name == nil && in.Description == nil && in.Instructions == nil {
		return &domain.ValidationError{FieldName: "name", Message: "give at least one of name, description and instructions"}
	}
	var name, description string
	if in.Name != nil {
		if name = strings.TrimSpace(*in.Name); name == "" {
			return &domain.ValidationError{FieldName: "name", Message: "must not be empty"}
		}
	}
	if in.Description != nil {
		if description = strings.TrimSpace(*in.Description); description == "" {
			return &domain.ValidationError{FieldName: "description", Message: "must not be empty"}
		}
	}
	if in.Name != nil || in.Description != nil {
		if err := sk.UpdateDetails(name, description, at); err != nil {
			return err
		}
	}
	if in.Instructions != nil {
		if err := sk.UpdateInstructions(*in.Instructions, false, at); err != nil {
			return err
		}
	}
	if in.Name != nil {
		return requireFreeName(ctx, tx, sk)
	}
	return nil
}

// recordMemoryPill records a learning of a running agent on one of its
// owner's skills (agent API). The pill id is derived from the command id
// unless the sender chose one.
func recordMemoryPill(now Clock) Handler {
	return func(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
		var pill domain.MemoryPill
		sk, err := updateSkill(ctx, tx, now, cmd, func(ctx context.Context, tx pgx.Tx, sk *domain.AgentSkill, in command.RecordMemoryPillData, at time.Time) error {
			if err := required("sessionId", in.SessionID); err != nil {
				return err
			}
			s, err := sessions.Get(ctx, tx, in.SessionID)
			if errors.Is(err, postgres.ErrNotFound) || (err == nil && s.OwnerID() != sk.OwnerID()) {
				return &domain.NotFoundError{Entity: "AgentSession", ID: in.SessionID.String()}
			}
			if err != nil {
				return err
			}
			id := in.PillID
			if id == uuid.Nil {
				id = uuid.NewSHA1(cmd.ID, []byte("memory_pill"))
			}
			pill, err = sk.RecordMemoryPill(id, s.ID(), in.Content, in.Category, at)
			return err
		})
		if err != nil {
			return nil, err
		}
		return command.MemoryPillResult{SkillID: sk.ID(), Pill: pill}, nil
	}
}
