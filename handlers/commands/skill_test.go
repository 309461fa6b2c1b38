package commands_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
)

func TestCreateSkill(t *testing.T) {
	h := startWorker(t, 0)
	id := uuid.New()
	schemaAsString, _ := json.Marshal(objectSchema)
	skill := ok[command.SkillState](t, h, domain.AggregateSkill, command.CreateSkill, id, command.CreateSkillData{
		Name: "Go style", Description: "How we write Go here", Instructions: "Wrap errors with %w.",
		ToolDefinitions: []command.ToolDefinition{tool("search_issues"), {Name: "lint", Description: "Runs the linter",
			InputSchema: schemaAsString, ServerURI: "stdio:///usr/bin/lint-mcp"}},
		SubAgentDefinitions: []command.SubAgentDefinition{{Name: "test-runner", ModelID: "claude-haiku-4-5", Instructions: "Run the tests."}},
	})
	assert.Equal(t, id, skill.ID)
	assert.Equal(t, 1, skill.SkillVersion)
	assert.EqualValues(t, 1, skill.Version, "the state is the stored one")
	assert.True(t, skill.IsActive)
	assert.Len(t, skill.ToolDefinitions, 2)
	assert.Equal(t, objectSchema, skill.ToolDefinitions[1].InputSchema, "a schema given as a string is stored as the schema")
	assert.Equal(t, []string{"agent_skill_created"}, h.outboxTypes(t, id))

	bad := func(change func(*command.CreateSkillData)) command.CreateSkillData {
		d := command.CreateSkillData{Name: "Another", Description: "Something else"}
		change(&d)
		return d
	}
	cs := func(name string, data command.CreateSkillData, kind, field string) refusalCase {
		return refusalCase{name: name, aggregate: domain.AggregateSkill, command: command.CreateSkill, id: uuid.New(), data: data, kind: kind, field: field}
	}
	h.checkRefusals(t, []refusalCase{
		cs("empty name", bad(func(d *command.CreateSkillData) { d.Name = " " }), command.KindValidation, "name"),
		cs("description too long", bad(func(d *command.CreateSkillData) { d.Description = strings.Repeat("x", 501) }), command.KindValidation, "description"),
		cs("tool schema not an object", bad(func(d *command.CreateSkillData) {
			d.ToolDefinitions = []command.ToolDefinition{{Name: "t", Description: "d", InputSchema: json.RawMessage(`{"type":"string"}`), ServerURI: "https://x.example"}}
		}), command.KindValidation, "toolDefinitions[0].inputSchema"),
		cs("relative server uri", bad(func(d *command.CreateSkillData) {
			tl := tool("t")
			tl.ServerURI = "mcp/issues"
			d.ToolDefinitions = []command.ToolDefinition{tl}
		}), command.KindValidation, "toolDefinitions[0].serverUri"),
		cs("duplicate tool names", bad(func(d *command.CreateSkillData) {
			d.ToolDefinitions = []command.ToolDefinition{tool("t"), tool("t")}
		}), command.KindValidation, "toolDefinitions"),
		cs("name taken, in another case", bad(func(d *command.CreateSkillData) { d.Name = "GO STYLE" }), command.KindConflict, "name"),
		{name: "id taken", aggregate: domain.AggregateSkill, command: command.CreateSkill, id: id,
			data: bad(func(*command.CreateSkillData) {}), kind: command.KindConflict},
	})
	// Another owner may use the same name.
	okAs[command.SkillState](t, h, uuid.NewString(), domain.AggregateSkill, command.CreateSkill, uuid.New(),
		command.CreateSkillData{Name: "Go style", Description: "Theirs"})
}

func TestUpdateSkill(t *testing.T) {
	h := startWorker(t, 0)
	id := h.newSkill(t, "Go style")
	h.newSkill(t, "SQL")
	name, instructions := "Go conventions", "Prefer table tests."
	skill := ok[command.SkillState](t, h, domain.AggregateSkill, command.UpdateSkill, id,
		command.UpdateSkillData{Name: &name, Instructions: &instructions})
	assert.Equal(t, name, skill.Name)
	assert.Equal(t, instructions, skill.Instructions)
	assert.Equal(t, 1, skill.SkillVersion, "a manual edit keeps the version")
	assert.EqualValues(t, 2, skill.Version)
	types := h.outboxTypes(t, id)
	assert.Contains(t, types, "agent_skill_updated")
	assert.Contains(t, types, "agent_skill_instructions_updated")

	empty, taken := " ", "sql"
	h.checkRefusals(t, []refusalCase{
		{name: "nothing to change", aggregate: domain.AggregateSkill, command: command.UpdateSkill, id: id,
			data: command.UpdateSkillData{}, kind: command.KindValidation, field: "name"},
		{name: "empty name", aggregate: domain.AggregateSkill, command: command.UpdateSkill, id: id,
			data: command.UpdateSkillData{Name: &empty}, kind: command.KindValidation, field: "name"},
		{name: "name taken", aggregate: domain.AggregateSkill, command: command.UpdateSkill, id: id,
			data: command.UpdateSkillData{Name: &taken}, kind: command.KindConflict, field: "name"},
		{name: "another owner's skill", aggregate: domain.AggregateSkill, command: command.UpdateSkill, id: id, owner: uuid.NewString(),
			data: command.UpdateSkillData{Name: &name}, kind: command.KindNotFound},
		{name: "unknown skill", aggregate: domain.AggregateSkill, command: command.UpdateSkill, id: uuid.New(),
			data: command.UpdateSkillData{Name: &name}, kind: command.KindNotFound},
	})
}

func TestActivateAndDeactivateSkill(t *testing.T) {
	h := startWorker(t, 0)
	id := h.newSkill(t, "Go style")
	assert.False(t, ok[command.SkillState](t, h, domain.AggregateSkill, command.DeactivateSkill, id, nil).IsActive)
	h.checkRefusals(t, []refusalCase{
		{name: "deactivate twice", aggregate: domain.AggregateSkill, command: command.DeactivateSkill, id: id,
			kind: command.KindConflict, status: "Inactive"},
		{name: "another owner's skill", aggregate: domain.AggregateSkill, command: command.ActivateSkill, id: id, owner: uuid.NewString(),
			kind: command.KindNotFound},
	})
	assert.True(t, ok[command.SkillState](t, h, domain.AggregateSkill, command.ActivateSkill, id, nil).IsActive)
	h.checkRefusals(t, []refusalCase{
		{name: "activate twice", aggregate: domain.AggregateSkill, command: command.ActivateSkill, id: id,
			kind: command.KindConflict, status: "Active"},
	})
	types := h.outboxTypes(t, id)
	assert.Contains(t, types, "agent_skill_deactivated")
	assert.Contains(t, types, "agent_skill_activated")
}

func TestMemoryPillsAreRecordedDismissedAndConsolidated(t *testing.T) {
	h := startWorker(t, 0)
	skill := h.newSkill(t, "Go style")
	session := h.newSession(t, true)
	record := func(content string) uuid.UUID {
		res := ok[command.MemoryPillResult](t, h, domain.AggregateSkill, command.RecordMemoryPill, skill,
			command.RecordMemoryPillData{SessionID: session, Content: content, Category: domain.PillTip})
		assert.Equal(t, domain.PillActive, res.Pill.Status)
		assert.Equal(t, session, res.Pill.SessionID)
		return res.Pill.ID
	}
	first, second, third := record("go test -race catches the map race"), record("use t.Cleanup"), record("errgroup for fan-out")

	s := ok[command.SkillState](t, h, domain.AggregateSkill, command.DismissMemoryPill, skill, command.PillData{PillID: third})
	assert.Equal(t, domain.PillDismissed, s.MemoryPills[2].Status)

	s = ok[command.SkillState](t, h, domain.AggregateSkill, command.ConsolidateSkill, skill,
		command.ConsolidateSkillData{PillIDs: []uuid.UUID{first, second}, UpdatedInstructions: "Run tests with -race; clean up with t.Cleanup."})
	assert.Equal(t, 2, s.SkillVersion)
	assert.Equal(t, domain.PillConsolidated, s.MemoryPills[0].Status)
	assert.NotNil(t, s.MemoryPills[1].ConsolidatedAt)
	types := h.outboxTypes(t, skill)
	for _, want := range []string{"memory_pill_recorded", "memory_pill_dismissed", "skill_consolidated"} {
		assert.Contains(t, types, want)
	}

	otherOwnersSession := uuid.New()
	okAs[command.StartSessionResult](t, h, uuid.NewString(), domain.AggregateSession, command.StartSession, otherOwnersSession, startData())
	pill := func(change func(*command.RecordMemoryPillData)) command.RecordMemoryPillData {
		d := command.RecordMemoryPillData{SessionID: session, Content: "a tip", Category: domain.PillTip}
		change(&d)
		return d
	}
	sk := func(name, cmd string, data any, kind, field, status string) refusalCase {
		return refusalCase{name: name, aggregate: domain.AggregateSkill, command: cmd, id: skill, data: data, kind: kind, field: field, status: status}
	}
	h.checkRefusals(t, []refusalCase{
		sk("empty content", command.RecordMemoryPill, pill(func(d *command.RecordMemoryPillData) { d.Content = "" }), command.KindValidation, "content", ""),
		sk("content too long", command.RecordMemoryPill, pill(func(d *command.RecordMemoryPillData) { d.Content = strings.Repeat("x", 2001) }), command.KindValidation, "content", ""),
		sk("unknown category", command.RecordMemoryPill, pill(func(d *command.RecordMemoryPillData) { d.Category = "Rumour" }), command.KindValidation, "category", ""),
		sk("no session", command.RecordMemoryPill, pill(func(d *command.RecordMemoryPillData) { d.SessionID = uuid.Nil }), command.KindValidation, "sessionId", ""),
		sk("another owner's session", command.RecordMemoryPill, pill(func(d *command.RecordMemoryPillData) { d.SessionID = otherOwnersSession }), command.KindNotFound, "", ""),
		sk("dismiss a consolidated pill", command.DismissMemoryPill, command.PillData{PillID: first}, command.KindConflict, "", "Consolidated"),
		sk("dismiss twice", command.DismissMemoryPill, command.PillData{PillID: third}, command.KindConflict, "", "Dismissed"),
		sk("dismiss an unknown pill", command.DismissMemoryPill, command.PillData{PillID: uuid.New()}, command.KindNotFound, "", ""),
		sk("consolidate a dismissed pill", command.ConsolidateSkill, command.ConsolidateSkillData{PillIDs: []uuid.UUID{third}, UpdatedInstructions: "x"}, command.KindConflict, "", "Dismissed"),
		sk("consolidate nothing", command.ConsolidateSkill, command.ConsolidateSkillData{UpdatedInstructions: "x"}, command.KindValidation, "pillIds", ""),
		{name: "unknown skill", aggregate: domain.AggregateSkill, command: command.RecordMemoryPill, id: uuid.New(),
			data: pill(func(*command.RecordMemoryPillData) {}), kind: command.KindNotFound},
	})
	stored, err := postgres.Skills{}.Get(context.Background(), h.pool, skill)
	require.NoError(t, err)
	assert.Len(t, stored.MemoryPills(), 3, "refusals change nothing")
	assert.Equal(t, 2, stored.SkillVersion())
}
