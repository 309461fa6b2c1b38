package domain

import (
	"slices"
	"time"

	"github.com/google/uuid"
)

// AddDefaultSkill makes sessions from this template start with the skill.
func (t *AgentTemplate) AddDefaultSkill(skillID uuid.UUID, now time.Time) error {
	if err := requireID("skillId", skillID); err != nil {
		return err
	}
	if slices.Contains(t.defaultSkillIDs, skillID) {
		return t.refuse("AddDefaultSkill", ErrDuplicate)
	}
	t.defaultSkillIDs = append(t.defaultSkillIDs, skillID)
	return t.updated(now)
}

// RemoveDefaultSkill removes a default skill.
func (t *AgentTemplate) RemoveDefaultSkill(skillID uuid.UUID, now time.Time) error {
	i := slices.Index(t.defaultSkillIDs, skillID)
	if i < 0 {
		return &NotFoundError{Entity: "DefaultSkill", ID: skillID.String()}
	}
	t.defaultSkillIDs = slices.Delete(t.defaultSkillIDs, i, i+1)
	return t.updated(now)
}

// AddClassificationRule adds a rule with an id not yet used.
func (t *AgentTemplate) AddClassificationRule(rule ClassificationRule, now time.Time) error {
	if err := rule.Validate(); err != nil {
		return err
	}
	if slices.ContainsFunc(t.rules, func(r ClassificationRule) bool { return r.ID == rule.ID }) {
		return t.refuse("AddClassificationRule", ErrDuplicate)
	}
	t.rules = append(t.rules, rule)
	return t.updated(now)
}

// RemoveClassificationRule removes the rule with ruleID.
func (t *AgentTemplate) RemoveClassificationRule(ruleID uuid.UUID, now time.Time) error {
	i := slices.IndexFunc(t.rules, func(r ClassificationRule) bool { return r.ID == ruleID })
	if i < 0 {
		return &NotFoundError{Entity: "ClassificationRule", ID: ruleID.String()}
	}
	t.rules = slices.Delete(t.rules, i, i+1)
	return t.updated(now)
}

// AddCustomToolDefinition registers an MCP tool for the template's
// sessions; names are unique within the template.
func (t *AgentTemplate) AddCustomToolDefinition(tool MCPToolDefinition, now time.Time) error {
	if err := tool.Validate(); err != nil {
		return err
	}
	if slices.ContainsFunc(t.customTools, func(d MCPToolDefinition) bool { return d.Name == tool.Name }) {
		return t.refuse("AddCustomToolDefinition", ErrDuplicate)
	}
	t.customTools = append(t.customTools, tool)
	return t.updated(now)
}

// RemoveCustomToolDefinition removes the MCP tool named name.
func (t *AgentTemplate) RemoveCustomToolDefinition(name string, now time.Time) error {
	i := slices.IndexFunc(t.customTools, func(d MCPToolDefinition) bool { return d.Name == name })
	if i < 0 {
		return &NotFoundError{Entity: "MCPToolDefinition", ID: name}
	}
	t.customTools = slices.Delete(t.customTools, i, i+1)
	return t.updated(now)
}

// UpdateSchedule sets the schedule, or removes it with nil (on-demand).
func (t *AgentTemplate) UpdateSchedule(schedule *AgentSchedule, now time.Time) error {
	if schedule != nil {
		if err := schedule.Validate(); err != nil {
			return err
		}
	}
	t.schedule = clonePtr(schedule)
	t.scheduleSince = now.UTC()
	return t.updated(now)
}

// Deactivate stops the template from creating sessions.
func (t *AgentTemplate) Deactivate(now time.Time) error {
	if !t.isActive {
		return t.refuse("Deactivate", ErrInvalidTransition)
	}
	t.isActive = false
	t.touch(now)
	t.raise(AgentTemplateDeactivatedEvent{TemplateMeta: t.meta(now)})
	return nil
}

// Activate lets the template create sessions again.
func (t *AgentTemplate) Activate(now time.Time) error {
	if t.isActive {
		return t.refuse("Activate", ErrInvalidTransition)
	}
	t.isActive = true
	t.scheduleSince = now.UTC()
	t.touch(now)
	t.raise(AgentTemplateActivatedEvent{TemplateMeta: t.meta(now)})
	return nil
}

func (t *AgentTemplate) updated(now time.Time) error {
	t.touch(now)
	t.raise(AgentTemplateUpdatedEvent{TemplateMeta: t.meta(now)})
	return nil
}
