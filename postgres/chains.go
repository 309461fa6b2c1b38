package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/domain"
)

// Chains stores SessionChain aggregates, with their sessions and handoff
// documents. Like Sessions, its methods run inside the caller's
// transaction.
type Chains struct{}

var chainDocs = docRepo[*domain.SessionChain, domain.SessionChainSnapshot]{
	table:    "chains",
	snapshot: (*domain.SessionChain).Snapshot,
	restore:  domain.UnmarshalSessionChainFromDatabase,
	version:  func(s *domain.SessionChainSnapshot) *int64 { return &s.Version },
	columns:  chainColumns,
}

// Add inserts a new chain and writes its events to the outbox.
func (Chains) Add(ctx context.Context, tx pgx.Tx, c *domain.SessionChain) error {
	return chainDocs.add(ctx, tx, c)
}

// Get loads a chain.
func (Chains) Get(ctx context.Context, q Querier, id uuid.UUID) (*domain.SessionChain, error) {
	return chainDocs.get(ctx, q, id)
}

// GetBySession loads the chain that contains sessionID (ErrNotFound when
// the session belongs to no chain, or has not joined its chain yet). The
// session row's chain_id finds the chain by index; the document confirms
// the membership.
func (Chains) GetBySession(ctx context.Context, q Querier, sessionID uuid.UUID) (*domain.SessionChain, error) {
	member, err := json.Marshal([]map[string]string{{"sessionId": sessionID.String()}})
	if err != nil {
		return nil, err
	}
	var raw []byte
	var version int64
	err = q.QueryRow(ctx, `
SELECT c.doc, c.version
  FROM chains c
 WHERE c.id = (SELECT chain_id FROM sessions WHERE id = $1)
   AND c.doc->'sessions' @> $2::jsonb`, sessionID, member).Scan(&raw, &version)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("chain of session %s: %w", sessionID, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	var snap domain.SessionChainSnapshot
	if err := json.Unmarshal(raw, &snap); err != nil {
		return nil, fmt.Errorf("chain of session %s: stored document unreadable: %w", sessionID, err)
	}
	snap.Version = version
	return domain.UnmarshalSessionChainFromDatabase(snap)
}

// Update loads a chain, lets change modify it, and saves it with its
// events (ErrVersionConflict if it was saved since). An error from change
// is returned as it is and nothing is saved.
func (Chains) Update(ctx context.Context, tx pgx.Tx, id uuid.UUID, change func(*domain.SessionChain) error) (*domain.SessionChain, error) {
	return chainDocs.update(ctx, tx, id, change)
}

// Save writes a loaded chain back with its events.
func (Chains) Save(ctx context.Context, tx pgx.Tx, c *domain.SessionChain) error {
	return chainDocs.save(ctx, tx, c)
}

func chainColumns(snap domain.SessionChainSnapshot) map[string]any {
	return map[string]any{
		"owner_id":   snap.OwnerID,
		"status":     string(snap.Status),
		"created_at": snap.CreatedAt,
		"updated_at": chainUpdatedAt(snap),
	}
}

// chainUpdatedAt is the time of the chain's latest change, which its
// state records: creation, a session joining, a handoff, the closing.
func chainUpdatedAt(snap domain.SessionChainSnapshot) time.Time {
	t := snap.CreatedAt
	later := func(u time.Time) {
		if u.After(t) {
			t = u
		}
	}
	for _, s := range snap.Sessions {
		later(s.JoinedAt)
	}
	for _, h := range snap.HandoffDocuments {
		later(h.CreatedAt)
	}
	if snap.CompletedAt != nil {
		later(*snap.CompletedAt)
	}
	return t
}
