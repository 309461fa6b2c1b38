package commands_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
)

// ok runs a command as the harness's owner and decodes its state into T.
func ok[T any](t *testing.T, h sessionHarness, aggregate, name string, id uuid.UUID, data any) T {
	t.Helper()
	return okAs[T](t, h, h.owner.String(), aggregate, name, id, data)
}

// okAs runs a command as owner ("" for an internal command).
func okAs[T any](t *testing.T, h sessionHarness, owner, aggregate, name string, id uuid.UUID, data any) T {
	t.Helper()
	r := h.send(t, aggregate, name, id, owner, data)
	require.NoError(t, r.Err(), name)
	var out T
	require.NoError(t, json.Unmarshal(r.State, &out))
	return out
}

// refusal runs a command as the harness's owner and returns its refusal.
func (h sessionHarness) refusal(t *testing.T, aggregate, name string, id uuid.UUID, data any) *command.Error {
	t.Helper()
	return h.refusalAs(t, h.owner.String(), aggregate, name, id, data)
}

func (h sessionHarness) refusalAs(t *testing.T, owner, aggregate, name string, id uuid.UUID, data any) *command.Error {
	t.Helper()
	r := h.send(t, aggregate, name, id, owner, data)
	e, ok := command.AsError(r.Err())
	require.True(t, ok, "%s must be refused", name)
	return e
}

// refusalCase is one way a command is refused: by kind, and by the field
// or the current status where the kind has one.
type refusalCase struct {
	name      string
	aggregate string
	command   string
	id        uuid.UUID
	owner     string // "" runs as the harness's owner
	data      any
	kind      string
	field     string
	status    string
}

func (h sessionHarness) checkRefusals(t *testing.T, cases []refusalCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			owner := c.owner
			if owner == "" {
				owner = h.owner.String()
			}
			e := h.refusalAs(t, owner, c.aggregate, c.command, c.id, c.data)
			assert.Equal(t, c.kind, e.Kind, e.Message)
			if c.field != "" {
				assert.Equal(t, c.field, e.Field, e.Message)
			}
			if c.status != "" {
				assert.Equal(t, c.status, e.CurrentStatus, e.Message)
			}
		})
	}
}

// outboxData returns the data of the last event of a type raised by an aggregate.
func (h sessionHarness) outboxData(t *testing.T, id uuid.UUID, typ string, into any) {
	t.Helper()
	var payload []byte
	require.NoError(t, h.pool.QueryRow(context.Background(),
		"SELECT payload FROM outbox WHERE aggregate_id = $1 AND type = $2 ORDER BY position DESC LIMIT 1", id, typ).Scan(&payload))
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	require.NoError(t, json.Unmarshal(payload, &env))
	require.NoError(t, json.Unmarshal(env.Data, into))
}

const objectSchema = `{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`

func tool(name string) command.ToolDefinition {
	return command.ToolDefinition{Name: name, Description: "Searches the issue tracker",
		InputSchema: json.RawMessage(objectSchema), ServerURI: "https://mcp.example.com/issues"}
}

// newSkill creates an active skill of the harness's owner.
func (h sessionHarness) newSkill(t *testing.T, name string) uuid.UUID {
	t.Helper()
	id := uuid.New()
	ok[command.SkillState](t, h, domain.AggregateSkill, command.CreateSkill, id, command.CreateSkillData{
		Name: name, Description: "How we write Go here", Instructions: "Wrap errors with %w."})
	return id
}

func templateData() command.CreateTemplateData {
	return command.CreateTemplateData{Name: "Bug fixer", ModelID: "claude-opus-4-6", SystemPrompt: "Fix the bug, add a test.",
		AllowedTools: []string{"Read", "Edit", "Bash"}, DefaultBudgetCapUsd: domain.Dollars(3)}
}

// newTemplate creates an active template of the harness's owner.
func (h sessionHarness) newTemplate(t *testing.T, data command.CreateTemplateData) uuid.UUID {
	t.Helper()
	id := uuid.New()
	ok[command.TemplateState](t, h, domain.AggregateTemplate, command.CreateTemplate, id, data)
	return id
}
