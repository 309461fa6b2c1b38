package postgres

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/domain"
)

// Sessions stores AgentSession aggregates. Its methods run inside the
// caller's transaction, so that a command's changes to several aggregates
// and their events commit together.
type Sessions struct{}

// Add inserts a new session and writes its events to the outbox.
func (Sessions) Add(ctx context.Context, tx pgx.Tx, s *domain.AgentSession) error {
	snap := s.Snapshot()
	snap.Version = 1
	if err := insertDoc(ctx, tx, "sessions", "id", s.ID(), snap, sessionColumns(snap)); err != nil {
		return err
	}
	return writeEvents(ctx, tx, 1, s.PopEvents())
}

// Get loads a session.
func (Sessions) Get(ctx context.Context, q Querier, id uuid.UUID) (*domain.AgentSession, error) {
	var snap domain.AgentSessionSnapshot
	version, err := loadDoc(ctx, q, "sessions", "id", id, &snap)
	if err != nil {
		return nil, err
	}
	snap.Version = version
	return domain.UnmarshalAgentSessionFromDatabase(snap)
}

// Update loads a session, lets change modify it, and saves it with its
// events, provided nobody saved it since it was loaded
// (ErrVersionConflict otherwise). An error from change is returned as it is
// and nothing is saved.
func (r Sessions) Update(ctx context.Context, tx pgx.Tx, id uuid.UUID, change func(*domain.AgentSession) error) (*domain.AgentSession, error) {
	s, err := r.Get(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	if err := change(s); err != nil {
		return nil, err
	}
	return s, r.Save(ctx, tx, s)
}

// Save writes a loaded session back with its events.
func (Sessions) Save(ctx context.Context, tx pgx.Tx, s *domain.AgentSession) error {
	snap := s.Snapshot()
	loaded := snap.Version
	snap.Version = loaded + 1
	if err := saveVersioned(ctx, tx, "sessions", "id", s.ID(), loaded, snap, sessionColumns(snap)); err != nil {
		return err
	}
	return writeEvents(ctx, tx, loaded+1, s.PopEvents())
}

func sessionColumns(snap domain.AgentSessionSnapshot) map[string]any {
	cols := map[string]any{
		"owner_id":    snap.OwnerID,
		"status":      string(snap.Status),
		"chain_id":    snap.ChainID,
		"template_id": snap.TemplateID,
		"created_at":  snap.CreatedAt,
		"updated_at":  snap.UpdatedAt,
	}
	if snap.APIKeyHash != "" {
		cols["api_key_hash"] = snap.APIKeyHash
	} else {
		cols["api_key_hash"] = nil
	}
	return cols
}
