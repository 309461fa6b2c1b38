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

var skillDocs = docRepo[*domain.AgentSkill, domain.AgentSkillSnapshot]{
	table:    "skills",
	snapshot: (*domain.AgentSkill).Snapshot,
	restore:  domain.UnmarshalAgentSkillFromDatabase,
	version:  func(s *domain.AgentSkillSnapshot) *int64 { return &s.Version },
	columns:  skillColumns,
}

// Add inserts a new skill and writes its events to the outbox.
func (Skills) Add(ctx context.Context, tx pgx.Tx, s *domain.AgentSkill) error {
	return skillDocs.add(ctx, tx, s)
}

// Get loads a skill.
func (Skills) Get(ctx context.Context, q Querier, id uuid.UUID) (*domain.AgentSkill, error) {
	return skillDocs.get(ctx, q, id)
}

// Update loads a skill, lets change modify it, and saves it with its
// events (ErrVersionConflict if it was saved since). An error from change
// is returned as it is and nothing is saved.
func (Skills) Update(ctx context.Context, tx pgx.Tx, id uuid.UUID, change func(*domain.AgentSkill) error) (*domain.AgentSkill, error) {
	return skillDocs.update(ctx, tx, id, change)
}

// Save writes a loaded skill back with its events.
func (Skills) Save(ctx context.Context, tx pgx.Tx, s *domain.AgentSkill) error {
	return skillDocs.save(ctx, tx, s)
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
