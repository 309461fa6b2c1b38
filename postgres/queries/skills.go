package queries

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/domain"
)

// SkillSummary is one row of a skill list (AgentSkillSummaryDto).
type SkillSummary struct {
	ID          uuid.UUID
	Name        string
	Description string
	// Version is the skill's instructions version (+1 per consolidation).
	Version         int
	IsActive        bool
	ToolCount       int
	SubAgentCount   int
	ActivePillCount int
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// ListSkillsParams selects the skills of ListSkills.
type ListSkillsParams struct {
	// Owner is whose skills to list.
	Owner uuid.UUID
	// IsActive, when set, keeps only the active (true) or deactivated
	// (false) skills.
	IsActive *bool
	Paging
}

// ListSkills returns one page of the owner's skills by name
// (ListAgentSkillsQuery).
func (s *Store) ListSkills(ctx context.Context, p ListSkillsParams) (Page[SkillSummary], error) {
	where, args := activeFilter("owner_id = $1", []any{p.Owner}, p.IsActive)
	return docPage(ctx, s.db, "skills", where, "name, id", args, p.Paging, func(snap domain.AgentSkillSnapshot, _ int64) SkillSummary {
		active := 0
		for _, pill := range snap.MemoryPills {
			if pill.Status == domain.PillActive {
				active++
			}
		}
		return SkillSummary{ID: snap.ID, Name: snap.Name, Description: snap.Description, Version: snap.SkillVersion,
			IsActive: snap.IsActive, ToolCount: len(snap.ToolDefinitions), SubAgentCount: len(snap.SubAgentDefinitions),
			ActivePillCount: active, CreatedAt: snap.CreatedAt, UpdatedAt: snap.UpdatedAt}
	})
}

// Skill returns the owner's skill id with its instructions, tools,
// subagents and memory pills (GetAgentSkillQuery). Another owner's skill
// is a *NotFoundError.
func (s *Store) Skill(ctx context.Context, owner, id uuid.UUID) (domain.AgentSkillSnapshot, error) {
	snap, version, err := ownedDoc[domain.AgentSkillSnapshot](ctx, s.db, "skills", "skill", owner, id)
	if err != nil {
		return snap, err
	}
	snap.Version = version
	if snap.MemoryPills == nil {
		snap.MemoryPills = []domain.MemoryPill{}
	}
	return snap, nil
}

// MemoryPillsParams selects the pills of MemoryPills.
type MemoryPillsParams struct {
	// Owner is whose skill it must be.
	Owner uuid.UUID
	// SkillID is the skill.
	SkillID uuid.UUID
	// Status, when set, keeps only the pills in that status.
	Status domain.MemoryPillStatus
	Paging
}

// MemoryPills returns one page of a skill's memory pills, newest first
// (GetSkillMemoryPillsQuery).
func (s *Store) MemoryPills(ctx context.Context, p MemoryPillsParams) (Page[domain.MemoryPill], error) {
	switch p.Status {
	case "", domain.PillActive, domain.PillConsolidated, domain.PillDismissed:
	default:
		return Page[domain.MemoryPill]{}, &domain.ValidationError{FieldName: "status", Message: fmt.Sprintf("unknown memory pill status %q", p.Status)}
	}
	snap, err := s.Skill(ctx, p.Owner, p.SkillID)
	if err != nil {
		return Page[domain.MemoryPill]{}, err
	}
	pills := make([]domain.MemoryPill, 0, len(snap.MemoryPills))
	for _, pill := range snap.MemoryPills {
		if p.Status == "" || pill.Status == p.Status {
			pills = append(pills, pill)
		}
	}
	// Pills are stored in recording order; the stable sort keeps that
	// order, reversed, among pills recorded at the same instant.
	slices.Reverse(pills)
	slices.SortStableFunc(pills, func(a, b domain.MemoryPill) int { return b.CreatedAt.Compare(a.CreatedAt) })
	paging := p.Paging.normalize()
	page := Page[domain.MemoryPill]{Items: []domain.MemoryPill{}, Total: len(pills), Page: paging.Page, PageSize: paging.PageSize}
	if start := paging.offset(); start < len(pills) {
		page.Items = pills[start:min(start+paging.PageSize, len(pills))]
	}
	return page, nil
}
