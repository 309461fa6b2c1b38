package queries

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
)

// SessionConfig returns the configuration the owner's session id runs
// with: composed from its template and enabled skills exactly as its
// sidecar gets it. Another owner's session is a *NotFoundError.
func (s *Store) SessionConfig(ctx context.Context, owner, id uuid.UUID) (domain.EffectiveConfig, error) {
	snap, err := s.Session(ctx, owner, id)
	if err != nil {
		return domain.EffectiveConfig{}, err
	}
	sess, err := domain.UnmarshalAgentSessionFromDatabase(snap)
	if err != nil {
		return domain.EffectiveConfig{}, fmt.Errorf("queries: session %s: %w", id, err)
	}
	return postgres.ComposeSessionConfig(ctx, s.db, sess)
}
