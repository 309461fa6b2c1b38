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

var templateDocs = docRepo[*domain.AgentTemplate, domain.AgentTemplateSnapshot]{
	table:    "templates",
	snapshot: (*domain.AgentTemplate).Snapshot,
	restore:  domain.UnmarshalAgentTemplateFromDatabase,
	version:  func(s *domain.AgentTemplateSnapshot) *int64 { return &s.Version },
	columns:  templateColumns,
}

// Add inserts a new template and writes its events to the outbox.
func (Templates) Add(ctx context.Context, tx pgx.Tx, t *domain.AgentTemplate) error {
	return templateDocs.add(ctx, tx, t)
}

// Get loads a template.
func (Templates) Get(ctx context.Context, q Querier, id uuid.UUID) (*domain.AgentTemplate, error) {
	return templateDocs.get(ctx, q, id)
}

// Update loads a template, lets change modify it, and saves it with its
// events (ErrVersionConflict if it was saved since). An error from change
// is returned as it is and nothing is saved.
func (Templates) Update(ctx context.Context, tx pgx.Tx, id uuid.UUID, change func(*domain.AgentTemplate) error) (*domain.AgentTemplate, error) {
	return templateDocs.update(ctx, tx, id, change)
}

// Save writes a loaded template back with its events.
func (Templates) Save(ctx context.Context, tx pgx.Tx, t *domain.AgentTemplate) error {
	return templateDocs.save(ctx, tx, t)
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
