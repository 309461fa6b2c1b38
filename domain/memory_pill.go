package domain

import (
	"slices"
	"time"

	"github.com/google/uuid"
)

// MaxPillChars bounds a memory pill.
const MaxPillChars = 2000

// MemoryPillCategory classifies a learning. The zero value is invalid.
type MemoryPillCategory string

// The categories.
const (
	PillMistake    MemoryPillCategory = "Mistake"
	PillTip        MemoryPillCategory = "Tip"
	PillGuideline  MemoryPillCategory = "Guideline"
	PillPattern    MemoryPillCategory = "Pattern"
	PillConvention MemoryPillCategory = "Convention"
)

// IsValid reports whether c is a known category.
func (c MemoryPillCategory) IsValid() bool {
	return slices.Contains([]MemoryPillCategory{PillMistake, PillTip, PillGuideline, PillPattern, PillConvention}, c)
}

// MemoryPillStatus is the state of a pill: Active, then Consolidated or
// Dismissed for good. The zero value is invalid.
type MemoryPillStatus string

// The pill statuses.
const (
	PillActive       MemoryPillStatus = "Active"
	PillConsolidated MemoryPillStatus = "Consolidated"
	PillDismissed    MemoryPillStatus = "Dismissed"
)

// MemoryPill is a learning an agent recorded on a skill during a session,
// until the owner folds it into the skill's instructions or dismisses it.
// It is an entity of AgentSkill: read it as a copy, change it through the
// skill.
type MemoryPill struct {
	ID             uuid.UUID          `json:"id"`
	SkillID        uuid.UUID          `json:"skillId"`
	SessionID      uuid.UUID          `json:"sessionId"`
	Content        string             `json:"content"`
	Category       MemoryPillCategory `json:"category"`
	Status         MemoryPillStatus   `json:"status"`
	CreatedAt      time.Time          `json:"createdAt"`
	ConsolidatedAt *time.Time         `json:"consolidatedAt,omitempty"`
	DismissedAt    *time.Time         `json:"dismissedAt,omitempty"`
}

func (p MemoryPill) clone() MemoryPill {
	p.ConsolidatedAt = clonePtr(p.ConsolidatedAt)
	p.DismissedAt = clonePtr(p.DismissedAt)
	return p
}

func (p MemoryPill) validate() error {
	if err := requireID("pillId", p.ID); err != nil {
		return err
	}
	if err := requireID("sessionId", p.SessionID); err != nil {
		return err
	}
	if _, err := requireText("content", p.Content, 1, MaxPillChars); err != nil {
		return err
	}
	if !p.Category.IsValid() {
		return invalid("category", "unknown memory pill category %q", p.Category)
	}
	if p.Status != PillActive && p.Status != PillConsolidated && p.Status != PillDismissed {
		return invalid("status", "unknown memory pill status %q", p.Status)
	}
	if (p.Status == PillConsolidated) != (p.ConsolidatedAt != nil) {
		return invalid("consolidatedAt", "is set exactly when the pill is Consolidated")
	}
	return nil
}

// refuse is the error for a pill that is no longer Active.
func (p MemoryPill) refuse(op string) error {
	return &TransitionError{Aggregate: "MemoryPill", Operation: op, Status: string(p.Status), Reason: ErrInvalidTransition}
}
