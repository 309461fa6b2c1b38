package domain

import (
	"slices"
	"time"

	"github.com/google/uuid"
)

// RecordMemoryPill records a learning an agent made during sessionID. It
// starts Active.
func (s *AgentSkill) RecordMemoryPill(id, sessionID uuid.UUID, content string, category MemoryPillCategory, now time.Time) (MemoryPill, error) {
	content, err := requireText("content", content, 1, MaxPillChars)
	if err != nil {
		return MemoryPill{}, err
	}
	p := MemoryPill{ID: id, SkillID: s.id, SessionID: sessionID, Content: content, Category: category,
		Status: PillActive, CreatedAt: now.UTC()}
	if err := p.validate(); err != nil {
		return MemoryPill{}, err
	}
	if s.pillIndex(id) >= 0 {
		return MemoryPill{}, &TransitionError{Aggregate: "AgentSkill", Operation: "RecordMemoryPill", Status: s.status(), Reason: ErrDuplicate}
	}
	s.pills = append(s.pills, p)
	s.touch(now)
	s.raise(MemoryPillRecordedEvent{SkillMeta: s.meta(now), PillID: id, SessionID: sessionID, Category: category})
	return p.clone(), nil
}

// DismissMemoryPill discards an Active pill.
func (s *AgentSkill) DismissMemoryPill(id uuid.UUID, now time.Time) error {
	p, err := s.activePill(id, "Dismiss")
	if err != nil {
		return err
	}
	t := now.UTC()
	p.Status, p.DismissedAt = PillDismissed, &t
	s.touch(now)
	s.raise(MemoryPillDismissedEvent{SkillMeta: s.meta(now), PillID: id})
	return nil
}

// ConsolidateMemoryPills folds Active pills into new instructions: each
// pill becomes Consolidated and the skill version goes up by exactly one.
// Either every pill qualifies or nothing changes.
func (s *AgentSkill) ConsolidateMemoryPills(ids []uuid.UUID, updatedInstructions string, now time.Time) error {
	if len(ids) == 0 {
		return invalid("pillIds", "must name at least one pill")
	}
	if _, err := uniqueIDs("pillIds", ids); err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := s.activePill(id, "Consolidate"); err != nil {
			return err
		}
	}
	t := now.UTC()
	for _, id := range ids {
		p := &s.pills[s.pillIndex(id)]
		p.Status, p.ConsolidatedAt = PillConsolidated, &t
	}
	if err := s.UpdateInstructions(updatedInstructions, true, now); err != nil {
		return err
	}
	s.raise(SkillConsolidatedEvent{SkillMeta: s.meta(now), NewVersion: s.skillVersion, ConsolidatedPillCount: len(ids)})
	return nil
}

func (s *AgentSkill) pillIndex(id uuid.UUID) int {
	return slices.IndexFunc(s.pills, func(p MemoryPill) bool { return p.ID == id })
}

// activePill finds a pill that must still be Active for op.
func (s *AgentSkill) activePill(id uuid.UUID, op string) (*MemoryPill, error) {
	i := s.pillIndex(id)
	if i < 0 {
		return nil, &NotFoundError{Entity: "MemoryPill", ID: id.String()}
	}
	p := &s.pills[i]
	if p.Status != PillActive {
		return nil, p.refuse(op)
	}
	return p, nil
}

// MemoryPills returns copies of the skill's pills, in recording order.
func (s *AgentSkill) MemoryPills() []MemoryPill {
	out := make([]MemoryPill, len(s.pills))
	for i, p := range s.pills {
		out[i] = p.clone()
	}
	return out
}

// ActivePillCount counts the pills waiting for consolidation.
func (s *AgentSkill) ActivePillCount() int {
	n := 0
	for _, p := range s.pills {
		if p.Status == PillActive {
			n++
		}
	}
	return n
}
