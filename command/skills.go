package command

import (
	"encoding/json"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/domain"
)

// The commands of the skill aggregate, sent on agents.cmd.skill.<name>
// with the skill id as the command's aggregateId (for CreateSkill, the new
// skill's id, chosen by the sender).
const (
	CreateSkill       = "create_skill"
	UpdateSkill       = "update_skill"
	ActivateSkill     = "activate_skill"
	DeactivateSkill   = "deactivate_skill"
	DismissMemoryPill = "dismiss_memory_pill"
	// RecordMemoryPill comes from the agent API: a running agent records
	// a learning on one of its skills.
	RecordMemoryPill = "record_memory_pill"
	// ConsolidateSkill folds memory pills into new instructions (sent when
	// a consolidation session completes).
	ConsolidateSkill = "consolidate_skill"
)

// ToolDefinition is an MCP tool as commands carry it.
type ToolDefinition struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// InputSchema is the tool's input as a JSON Schema of type object:
	// the schema itself, or a string holding it.
	InputSchema json.RawMessage `json:"inputSchema"`
	// ServerURI is the MCP server's absolute URI.
	ServerURI string `json:"serverUri"`
}

// SubAgentDefinition is a subagent a skill provides.
type SubAgentDefinition struct {
	Name            string           `json:"name"`
	Description     string           `json:"description,omitempty"`
	ModelID         string           `json:"modelId"`
	Instructions    string           `json:"instructions,omitempty"`
	ToolDefinitions []ToolDefinition `json:"toolDefinitions,omitempty"`
}

// CreateSkillData creates an active skill at version 1. Its name must be
// unique among the owner's skills.
type CreateSkillData struct {
	Name                string               `json:"name"`
	Description         string               `json:"description"`
	Instructions        string               `json:"instructions,omitempty"`
	ToolDefinitions     []ToolDefinition     `json:"toolDefinitions,omitempty"`
	SubAgentDefinitions []SubAgentDefinition `json:"subAgentDefinitions,omitempty"`
}

// UpdateSkillData changes the fields that are set. A manual edit of the
// instructions keeps the skill's version; consolidation bumps it.
type UpdateSkillData struct {
	Name         *string `json:"name,omitempty"`
	Description  *string `json:"description,omitempty"`
	Instructions *string `json:"instructions,omitempty"`
}

// RecordMemoryPillData records a learning of the agent of SessionID.
// PillID is optional; by default it is derived from the command id.
type RecordMemoryPillData struct {
	PillID    uuid.UUID                 `json:"pillId,omitempty"`
	SessionID uuid.UUID                 `json:"sessionId"`
	Content   string                    `json:"content"`
	Category  domain.MemoryPillCategory `json:"category"`
}

// PillData names one memory pill of the skill.
type PillData struct {
	PillID uuid.UUID `json:"pillId"`
}

// ConsolidateSkillData marks the pills Consolidated and replaces the
// instructions, bumping the skill's version by one.
type ConsolidateSkillData struct {
	PillIDs             []uuid.UUID `json:"pillIds"`
	UpdatedInstructions string      `json:"updatedInstructions"`
}

// SkillState is what a skill command returns: the skill's state, memory
// pills included.
type SkillState = domain.AgentSkillSnapshot

// MemoryPillResult is what RecordMemoryPill returns: the new pill.
type MemoryPillResult struct {
	SkillID uuid.UUID         `json:"skillId"`
	Pill    domain.MemoryPill `json:"pill"`
}
