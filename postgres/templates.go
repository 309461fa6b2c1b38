package postgres

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/domain"
)

// Templates stores AgentTemplate aggregates. Its methods run inside the
// caller's transaction.
type Templates struct{}

// Add inserts a new template and writes its events to the outbox.
func (Templates) Add(ctx context.Context, tx pgx.Tx, t *domain.AgentTemplate) error {
	snap := t.Snapshot()
	snap.Version = 1
	if err := insertDoc(ctx, tx, "templates", "id", t.ID(), snap, templateColumns(snap)); err != nil {
		return err
	}
	return writeEvents(ctx, tx, 1, t.PopEvents())
}

// Get loads a template.
func (Templates) Get(ctx context.Context, q Querier, id uuid.UUID) (*domain.AgentTemplate, error) {
	var snap domain.AgentTemplateSnapshot
	version, err := loadDoc(ctx, q, "templates", "id", id, &snap)
	if err != nil {
		return nil, err
	}
	snap.Version = version
	return domain.UnmarshalAgentTemplateFromDatabase(snap)
}

// Update loads a template, lets change modify it, and saves it with its
// events (ErrVersionConflict if it was saved since). An error from change
// is returned as it is and nothing is saved.
func (r Templates) Update(ctx context.Context, tx pgx.Tx, id uuid.UUID, change func(*domain.AgentTemplate) error) (*domain.AgentTemplate, error) {
	t, err := r.Get(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	if err := change(t); err != nil {
		return nil, err
	}
	return t, r.Save(ctx, tx, t)
}

// Save writes a loaded template back with its events.
func (Templates) Save(ctx context.Context, tx pgx.Tx, t *domain.AgentTemplate) error {
	snap := t.Snapshot()
	loaded := snap.Version
	snap.Version = loaded + 1
	if err := saveVersioned(ctx, tx, "templates", "id", t.ID(), loaded, snap, templateColumns(snap)); err != nil {
		return err
	}
	return writeEvents(ctx, tx, loaded+1, t.PopEvents())
}

func templateColumns(snap domain.AgentTemplateSnapshot) map[string]any {
	return map[string]any{
		"owner_id":   snap.OwnerID,
		"name":       snap.Name,
		"is_active":  snap.IsActive,
		"created_at": snap.CreatedAt,
		"updated_at": snap.UpdatedAt,
	}
}
