package queries

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/domain"
)

// TemplateSummary is one row of a template list (AgentTemplateSummaryDto).
type TemplateSummary struct {
	ID                   uuid.UUID
	Name                 string
	Description          string
	ModelID              string
	IsActive             bool
	PlanApprovalRequired bool
	DefaultBudgetCapUsd  domain.USD
	AllowedToolCount     int
	CustomToolCount      int
	DefaultSkillCount    int
	RuleCount            int
	// Scheduled reports an automation template with an enabled schedule.
	Scheduled bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ListTemplatesParams selects the templates of ListTemplates.
type ListTemplatesParams struct {
	// Owner is whose templates to list.
	Owner uuid.UUID
	// IsActive, when set, keeps only the active (true) or deactivated
	// (false) templates.
	IsActive *bool
	Paging
}

// ListTemplates returns one page of the owner's templates by name
// (ListAgentTemplatesQuery).
func (s *Store) ListTemplates(ctx context.Context, p ListTemplatesParams) (Page[TemplateSummary], error) {
	where, args := activeFilter("owner_id = $1", []any{p.Owner}, p.IsActive)
	return docPage(ctx, s.db, "templates", where, "name, id", args, p.Paging, func(snap domain.AgentTemplateSnapshot, _ int64) TemplateSummary {
		return TemplateSummary{ID: snap.ID, Name: snap.Name, Description: snap.Description, ModelID: snap.ModelID,
			IsActive: snap.IsActive, PlanApprovalRequired: snap.PlanApprovalRequired,
			DefaultBudgetCapUsd: snap.DefaultBudget.HardCapUsd, AllowedToolCount: len(snap.AllowedTools),
			CustomToolCount: len(snap.CustomToolDefinitions), DefaultSkillCount: len(snap.DefaultSkillIDs),
			RuleCount: len(snap.ClassificationRules), Scheduled: snap.Schedule != nil && snap.Schedule.IsEnabled,
			CreatedAt: snap.CreatedAt, UpdatedAt: snap.UpdatedAt}
	})
}

// Template returns the owner's template id (GetAgentTemplateQuery).
// Another owner's template is a *NotFoundError.
func (s *Store) Template(ctx context.Context, owner, id uuid.UUID) (domain.AgentTemplateSnapshot, error) {
	snap, version, err := ownedDoc[domain.AgentTemplateSnapshot](ctx, s.db, "templates", "template", owner, id)
	snap.Version = version
	return snap, err
}

// ScheduledTemplate is an active template with an enabled schedule, and
// how far the scheduler got with it.
type ScheduledTemplate struct {
	Template domain.AgentTemplateSnapshot
	// HandledThrough is the last due time handled (started or skipped);
	// zero before the first.
	HandledThrough time.Time
}

// ScheduledTemplates returns every active template with an enabled
// schedule, of every owner, for the scheduler. It is a worker's question,
// not an owner's: it is not scoped.
func ScheduledTemplates(ctx context.Context, db DB) ([]ScheduledTemplate, error) {
	rows, err := db.Query(ctx, `SELECT t.doc, t.version, r.handled_through FROM templates t
LEFT JOIN schedule_runs r ON r.template_id = t.id
WHERE t.is_active AND (t.doc->'schedule'->>'isEnabled')::boolean ORDER BY t.id`)
	if err != nil {
		return nil, fmt.Errorf("queries: scheduled templates: %w", err)
	}
	defer rows.Close()
	var out []ScheduledTemplate
	for rows.Next() {
		var (
			raw     []byte
			version int64
			through *time.Time
			st      ScheduledTemplate
		)
		if err := rows.Scan(&raw, &version, &through); err != nil {
			return nil, fmt.Errorf("queries: scheduled templates: %w", err)
		}
		if err := json.Unmarshal(raw, &st.Template); err != nil {
			return nil, fmt.Errorf("queries: stored template unreadable: %w", err)
		}
		st.Template.Version = version
		if through != nil {
			st.HandledThrough = through.UTC()
		}
		out = append(out, st)
	}
	return out, rows.Err()
}
