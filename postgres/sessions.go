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

var sessionDocs = docRepo[*domain.AgentSession, domain.AgentSessionSnapshot]{
	table:    "sessions",
	snapshot: (*domain.AgentSession).Snapshot,
	restore:  domain.UnmarshalAgentSessionFromDatabase,
	version:  func(s *domain.AgentSessionSnapshot) *int64 { return &s.Version },
	columns:  sessionColumns,
}

// Add inserts a new session and writes its events to the outbox.
func (Sessions) Add(ctx context.Context, tx pgx.Tx, s *domain.AgentSession) error {
	return sessionDocs.add(ctx, tx, s)
}

// Get loads a session.
func (Sessions) Get(ctx context.Context, q Querier, id uuid.UUID) (*domain.AgentSession, error) {
	return sessionDocs.get(ctx, q, id)
}

// Update loads a session, lets change modify it, and saves it with its
// events, provided nobody saved it since it was loaded
// (ErrVersionConflict otherwise). An error from change is returned as it is
// and nothing is saved.
func (Sessions) Update(ctx context.Context, tx pgx.Tx, id uuid.UUID, change func(*domain.AgentSession) error) (*domain.AgentSession, error) {
	return sessionDocs.update(ctx, tx, id, change)
}

// Save writes a loaded session back with its events.
func (Sessions) Save(ctx context.Context, tx pgx.Tx, s *domain.AgentSession) error {
	return sessionDocs.save(ctx, tx, s)
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
	cols["api_key_hash"] = nullIfEmpty(snap.APIKeyHash)
	cols["sidecar_key_hash"] = nullIfEmpty(snap.SidecarKeyHash)
	return cols
}

// nullIfEmpty stores "" as NULL, which a UNIQUE column holds any number of.
func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
