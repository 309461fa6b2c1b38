package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
)

// alreadyExists refuses a create whose aggregate id is taken.
type alreadyExists struct {
	what string
	id   uuid.UUID
}

func (e alreadyExists) Error() string { return fmt.Sprintf("%s %s already exists", e.what, e.id) }
func (e alreadyExists) Kind() string  { return command.KindConflict }

// created maps the duplicate-id error of a repository's Add to a refusal.
func created(err error, what string, id uuid.UUID) error {
	if errors.Is(err, domain.ErrDuplicate) {
		return alreadyExists{what, id}
	}
	return err
}

// nameTaken refuses a skill name the owner already uses.
type nameTaken struct{ name string }

func (e nameTaken) Error() string {
	return fmt.Sprintf("name: another of your skills is named %q", e.name)
}
func (e nameTaken) Kind() string  { return command.KindConflict }
func (e nameTaken) Field() string { return "name" }

// toolDefinition validates an MCP tool from a command. The input schema
// may come as the schema object or as a string holding it.
func toolDefinition(t command.ToolDefinition) (domain.MCPToolDefinition, error) {
	raw := bytes.TrimSpace(t.InputSchema)
	schema := string(raw)
	if len(raw) > 0 && raw[0] == '"' {
		if err := json.Unmarshal(raw, &schema); err != nil {
			return domain.MCPToolDefinition{}, &domain.ValidationError{FieldName: "inputSchema", Message: "must be a JSON Schema or a string holding one"}
		}
	}
	return domain.NewMCPToolDefinition(t.Name, t.Description, schema, t.ServerURI)
}

// toolDefinitions validates a list of tools; an error names the list
// entry (customToolDefinitions[2].serverUri).
func toolDefinitions(field string, tools []command.ToolDefinition) ([]domain.MCPToolDefinition, error) {
	out := make([]domain.MCPToolDefinition, 0, len(tools))
	for i, t := range tools {
		d, err := toolDefinition(t)
		if err != nil {
			return nil, inField(fmt.Sprintf("%s[%d]", field, i), err)
		}
		out = append(out, d)
	}
	return out, nil
}

func subAgentDefinitions(defs []command.SubAgentDefinition) ([]domain.SkillSubAgentDefinition, error) {
	out := make([]domain.SkillSubAgentDefinition, 0, len(defs))
	for i, d := range defs {
		field := fmt.Sprintf("subAgentDefinitions[%d]", i)
		tools, err := toolDefinitions(field+".toolDefinitions", d.ToolDefinitions)
		if err != nil {
			return nil, err
		}
		out = append(out, domain.SkillSubAgentDefinition{Name: d.Name, Description: d.Description,
			ModelID: d.ModelID, Instructions: d.Instructions, ToolDefinitions: tools})
	}
	return out, nil
}

// inField prefixes the field of a validation error with where the value
// sits in the command.
func inField(prefix string, err error) error {
	var v *domain.ValidationError
	if errors.As(err, &v) {
		return &domain.ValidationError{FieldName: prefix + "." + v.FieldName, Message: v.Message}
	}
	return err
}

// ownedSkill loads a skill of owner; a missing skill and another owner's
// are both not found.
func ownedSkill(ctx context.Context, q postgres.Querier, id, owner uuid.UUID) (*domain.AgentSkill, error) {
	sk, err := skills.Get(ctx, q, id)
	if errors.Is(err, postgres.ErrNotFound) || (err == nil && sk.OwnerID() != owner) {
		return nil, &domain.NotFoundError{Entity: "AgentSkill", ID: id.String()}
	}
	return sk, err
}

// ownedSkills loads the skills ids of owner, each once, in order.
func ownedSkills(ctx context.Context, q postgres.Querier, ids []uuid.UUID, owner uuid.UUID) ([]*domain.AgentSkill, error) {
	out := make([]*domain.AgentSkill, 0, len(ids))
	seen := map[uuid.UUID]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		sk, err := ownedSkill(ctx, q, id, owner)
		if err != nil {
			return nil, err
		}
		out = append(out, sk)
	}
	return out, nil
}

// required refuses a missing id.
func required(field string, id uuid.UUID) error {
	if id == uuid.Nil {
		return &domain.ValidationError{FieldName: field, Message: "must be set"}
	}
	return nil
}

// The states the chain, skill and template commands return once they
// saved the aggregate: at the version the save stored (one more than the
// version it was loaded at), like SessionState.

func chainState(c *domain.SessionChain) command.ChainState {
	snap := c.Snapshot()
	snap.Version++
	return snap
}

func skillState(sk *domain.AgentSkill) command.SkillState {
	snap := sk.Snapshot()
	snap.Version++
	return snap
}

func templateState(t *domain.AgentTemplate) command.TemplateState {
	snap := t.Snapshot()
	snap.Version++
	return snap
}
