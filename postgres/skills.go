package postgres

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/domain"
)

// Skills stores AgentSkill aggregates with their memory pills. Its
// methods run inside the caller's transaction.
type Skills struct{}

// Add inserts a new skill and writes its events to the outbox.
func (Skills) Add(ctx context.Context, tx pgx.Tx, s *domain.AgentSkill) error {
	snap := s.Snapshot()
	snap.Version = 1
	if err := insertDoc(ctx, tx, "skills", "id", s.ID(), snap, skillColumns(snap)); err != nil {
		return err
	}
	return writeEvents(ctx, tx, 1, s.PopEvents())
}

// Get loads a skill.
func (Skills) Get(ctx context.Context, q Querier, id uuid.UUID) (*domain.AgentSkill, error) {
	var snap domain.AgentSkillSnapshot
	version, err := loadDoc(ctx, q, "skills", "id", id, &snap)
	if err != nil {
		return nil, err
	}
	snap.Version = version
	return domain.UnmarshalAgentSkillFromDatabase(snap)
}

// Update loads a skill, lets change modify it, and saves it with its
// events (ErrVersionConflict if it was saved since). An error from change
// is returned as it is and nothing is saved.
func (r Skills) Update(ctx context.Context, tx pgx.Tx, id uuid.UUID, change func(*domain.AgentSkill) error) (*domain.AgentSkill, error) {
	s, err := r.Get(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	if err := change(s); err != nil {
		return nil, err
	}
	return s, r.Save(ctx, tx, s)
}

// Save writes a loaded skill back with its events.
func (Skills) Save(ctx context.Context, tx pgx.Tx, s *domain.AgentSkill) error {
	snap := s.Snapshot()
	loaded := snap.Version
	snap.Version = loaded + 1
	if err := saveVersioned(ctx, tx, "skills", "id", s.ID(), loaded, snap, skillColumns(snap)); err != nil {
		return err
	}
	return writeEvents(ctx, tx, loaded+1, s.PopEvents())
}

// NameTaken reports whether another skill of owner (not except) is named
// name, ignoring case. Callers that must keep names unique hold the
// owner's catalog lock (LockCatalog) so the answer stays true until commit.
func (Skills) NameTaken(ctx context.Context, q Querier, owner uuid.UUID, name string, except uuid.UUID) (bool, error) {
	var taken bool
	err := q.QueryRow(ctx,
		"SELECT EXISTS (SELECT 1 FROM skills WHERE owner_id = $1 AND lower(name) = lower($2) AND id <> $3)",
		owner, name, except).Scan(&taken)
	return taken, err
}

// LockCatalog serialises, until tx ends, the transactions that change the
// names in one owner's catalog of kind (skills), so that a uniqueness check
// and the write it guards are not interleaved.
func LockCatalog(ctx context.Context, tx pgx.Tx, kind string, owner uuid.UUID) error {
	_, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", kind+":"+owner.String())
	return err
}

func skillColumns(snap domain.AgentSkillSnapshot) map[string]any {
	return map[string]any{
		"owner_id":   snap.OwnerID,
		"name":       snap.Name,
		"is_active":  snap.IsActive,
		"created_at": snap.CreatedAt,
		"updated_at": snap.UpdatedAt,
	}
}
