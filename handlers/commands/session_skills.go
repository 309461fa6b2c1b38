package commands

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
)

// registerSessionSkills adds the session commands that need a skill
// loaded beside the session.
func registerSessionSkills(d *Dispatcher, now Clock) {
	d.Register(domain.AggregateSession, command.EnableSkill, enableSkill(now))
}

// enableSkill hot-loads an active skill of the session's owner into an
// Idle or Interrupted session; the caller follows with a reload.
func enableSkill(now Clock) Handler {
	return func(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
		in, err := decode[command.SkillData](cmd)
		if err != nil {
			return nil, err
		}
		if err := required("skillId", in.SkillID); err != nil {
			return nil, err
		}
		skill, err := skills.Get(ctx, tx, in.SkillID)
		if errors.Is(err, postgres.ErrNotFound) {
			return nil, &domain.NotFoundError{Entity: "AgentSkill", ID: in.SkillID.String()}
		}
		if err != nil {
			return nil, err
		}
		s, err := sessions.Update(ctx, tx, cmd.AggregateID, func(s *domain.AgentSession) error {
			if err := checkOwner(cmd, s.OwnerID().String(), "session"); err != nil {
				return err
			}
			// The domain hides another owner's skill as not found.
			return s.EnableSkill(skill, now().UTC())
		})
		if err != nil {
			return nil, err
		}
		return SessionState(s), nil
	}
}
