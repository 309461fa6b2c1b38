package postgres

import (
	"context"
	"errors"

	"github.com/agentbus/agentbus/domain"
)

// ComposeSessionConfig loads the template and the enabled skills of s and
// composes the configuration its sidecar runs with. Every reader of a
// session's effective config (the runtime, a reload, the API) goes through
// here, so the sidecar runs with what the owner is shown.
func ComposeSessionConfig(ctx context.Context, q Querier, s *domain.AgentSession) (domain.EffectiveConfig, error) {
	var template *domain.AgentTemplate
	if id := s.TemplateID(); id != nil {
		t, err := Templates{}.Get(ctx, q, *id)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return domain.EffectiveConfig{}, err
		}
		template = t
	}
	ids := s.EnabledSkillIDs()
	skills := make([]*domain.AgentSkill, 0, len(ids))
	for _, id := range ids {
		sk, err := Skills{}.Get(ctx, q, id)
		if errors.Is(err, ErrNotFound) {
			continue // the domain reports the missing skill
		}
		if err != nil {
			return domain.EffectiveConfig{}, err
		}
		skills = append(skills, sk)
	}
	return s.ComposeConfig(template, skills)
}
