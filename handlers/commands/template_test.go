package commands_test

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
)

func TestCreateTemplate(t *testing.T) {
	h := startWorker(t, 0)
	skill := h.newSkill(t, "Go style")
	id := uuid.New()
	data := templateData()
	data.DefaultSkillIDs = []uuid.UUID{skill}
	data.CustomToolDefinitions = []command.ToolDefinition{tool("search_issues")}
	data.ClassificationRules = []command.RuleData{{MatchField: "subject", MatchPattern: "(?i)outage", ClassifyAs: "urgent"}}
	data.Schedule = &domain.AgentSchedule{CronExpression: "0 9 * * 1-5", TimeZone: "Europe/Madrid", IsEnabled: true}
	tmpl := ok[command.TemplateState](t, h, domain.AggregateTemplate, command.CreateTemplate, id, data)
	assert.True(t, tmpl.IsActive)
	assert.EqualValues(t, 1, tmpl.Version, "the state is the stored one")
	assert.Equal(t, domain.Dollars(3), tmpl.DefaultBudget.HardCapUsd)
	assert.Equal(t, domain.DefaultWarnAtPercent, tmpl.DefaultBudget.WarnAtPercent)
	assert.Equal(t, []uuid.UUID{skill}, tmpl.DefaultSkillIDs)
	require.Len(t, tmpl.ClassificationRules, 1)
	assert.NotEqual(t, uuid.Nil, tmpl.ClassificationRules[0].ID, "a rule gets an id")
	assert.Equal(t, []string{"agent_template_created"}, h.outboxTypes(t, id))

	theirSkill := uuid.New()
	okAs[command.SkillState](t, h, uuid.NewString(), domain.AggregateSkill, command.CreateSkill, theirSkill,
		command.CreateSkillData{Name: "Theirs", Description: "Not yours"})
	bad := func(change func(*command.CreateTemplateData)) command.CreateTemplateData {
		d := templateData()
		change(&d)
		return d
	}
	ct := func(name string, data command.CreateTemplateData, kind, field string) refusalCase {
		return refusalCase{name: name, aggregate: domain.AggregateTemplate, command: command.CreateTemplate, id: uuid.New(), data: data, kind: kind, field: field}
	}
	h.checkRefusals(t, []refusalCase{
		ct("empty name", bad(func(d *command.CreateTemplateData) { d.Name = "" }), command.KindValidation, "name"),
		ct("no model", bad(func(d *command.CreateTemplateData) { d.ModelID = "" }), command.KindValidation, "modelId"),
		ct("no allowed tools", bad(func(d *command.CreateTemplateData) { d.AllowedTools = nil }), command.KindValidation, "allowedTools"),
		ct("no budget", bad(func(d *command.CreateTemplateData) { d.DefaultBudgetCapUsd = 0 }), command.KindValidation, "budget.hardCapUsd"),
		ct("bad cron", bad(func(d *command.CreateTemplateData) {
			d.Schedule = &domain.AgentSchedule{CronExpression: "every morning", TimeZone: "UTC"}
		}), command.KindValidation, ""),
		ct("bad custom tool", bad(func(d *command.CreateTemplateData) {
			tl := tool("t")
			tl.ServerURI = ""
			d.CustomToolDefinitions = []command.ToolDefinition{tl}
		}), command.KindValidation, "customToolDefinitions[0].serverUri"),
		ct("another owner's default skill", bad(func(d *command.CreateTemplateData) { d.DefaultSkillIDs = []uuid.UUID{theirSkill} }), command.KindNotFound, ""),
		ct("unknown default skill", bad(func(d *command.CreateTemplateData) { d.DefaultSkillIDs = []uuid.UUID{uuid.New()} }), command.KindNotFound, ""),
		{name: "id taken", aggregate: domain.AggregateTemplate, command: command.CreateTemplate, id: id, data: templateData(), kind: command.KindConflict},
	})
}

func TestUpdateTemplate(t *testing.T) {
	h := startWorker(t, 0)
	id := h.newTemplate(t, templateData())
	name, warn, planApproval := "Careful bug fixer", 50, true
	tmpl := ok[command.TemplateState](t, h, domain.AggregateTemplate, command.UpdateTemplate, id, command.UpdateTemplateData{
		Name: &name, WarnAtPercent: &warn, PlanApprovalRequired: &planApproval,
		Schedule: &domain.AgentSchedule{CronExpression: "*/15 * * * *", TimeZone: "UTC", IsEnabled: true}})
	assert.Equal(t, name, tmpl.Name)
	assert.Equal(t, domain.SessionBudget{HardCapUsd: domain.Dollars(3), WarnAtPercent: 50}, tmpl.DefaultBudget, "the cap is kept")
	assert.True(t, tmpl.PlanApprovalRequired)
	require.NotNil(t, tmpl.Schedule)
	tmpl = ok[command.TemplateState](t, h, domain.AggregateTemplate, command.UpdateTemplate, id, command.UpdateTemplateData{RemoveSchedule: true})
	assert.Nil(t, tmpl.Schedule)
	assert.Contains(t, h.outboxTypes(t, id), "agent_template_updated")

	empty, noTools, zero := "", []string{}, domain.USD(0)
	ut := func(name string, data command.UpdateTemplateData, kind, field string) refusalCase {
		return refusalCase{name: name, aggregate: domain.AggregateTemplate, command: command.UpdateTemplate, id: id, data: data, kind: kind, field: field}
	}
	h.checkRefusals(t, []refusalCase{
		ut("nothing to change", command.UpdateTemplateData{}, command.KindValidation, "name"),
		ut("empty name", command.UpdateTemplateData{Name: &empty}, command.KindValidation, "name"),
		ut("no allowed tools", command.UpdateTemplateData{AllowedTools: &noTools}, command.KindValidation, "allowedTools"),
		ut("zero budget", command.UpdateTemplateData{DefaultBudgetCapUsd: &zero}, command.KindValidation, "budget.hardCapUsd"),
		{name: "another owner's template", aggregate: domain.AggregateTemplate, command: command.UpdateTemplate, id: id,
			owner: uuid.NewString(), data: command.UpdateTemplateData{Name: &name}, kind: command.KindNotFound},
		{name: "unknown template", aggregate: domain.AggregateTemplate, command: command.UpdateTemplate, id: uuid.New(),
			data: command.UpdateTemplateData{Name: &name}, kind: command.KindNotFound},
	})
}

func TestTemplateRulesToolsAndSkills(t *testing.T) {
	h := startWorker(t, 0)
	id := h.newTemplate(t, templateData())
	skill := h.newSkill(t, "Go style")
	theirSkill := uuid.New()
	okAs[command.SkillState](t, h, uuid.NewString(), domain.AggregateSkill, command.CreateSkill, theirSkill,
		command.CreateSkillData{Name: "Theirs", Description: "Not yours"})

	tmpl := ok[command.TemplateState](t, h, domain.AggregateTemplate, command.AddRule, id,
		command.RuleData{MatchField: "from", MatchPattern: "@bank.example$", ClassifyAs: "finance", MinPriority: "High"})
	require.Len(t, tmpl.ClassificationRules, 1)
	rule := tmpl.ClassificationRules[0].ID

	schemaAsString, _ := json.Marshal(objectSchema)
	tmpl = ok[command.TemplateState](t, h, domain.AggregateTemplate, command.AddTool, id, tool("search_issues"))
	tmpl = ok[command.TemplateState](t, h, domain.AggregateTemplate, command.AddTool, id, command.ToolDefinition{
		Name: "lint", Description: "Runs the linter", InputSchema: schemaAsString, ServerURI: "stdio:///usr/bin/lint-mcp"})
	require.Len(t, tmpl.CustomToolDefinitions, 2)
	tmpl = ok[command.TemplateState](t, h, domain.AggregateTemplate, command.AddTemplateSkill, id, command.SkillData{SkillID: skill})
	assert.Equal(t, []uuid.UUID{skill}, tmpl.DefaultSkillIDs)

	tr := func(name, cmd string, data any, kind, field, status string) refusalCase {
		return refusalCase{name: name, aggregate: domain.AggregateTemplate, command: cmd, id: id, data: data, kind: kind, field: field, status: status}
	}
	h.checkRefusals(t, []refusalCase{
		tr("rule without field", command.AddRule, command.RuleData{MatchPattern: "x", ClassifyAs: "y"}, command.KindValidation, "classificationRules.matchField", ""),
		tr("rule id used", command.AddRule, command.RuleData{RuleID: rule, MatchField: "a", MatchPattern: "b", ClassifyAs: "c"}, command.KindConflict, "", "Active"),
		tr("remove an unknown rule", command.RemoveRule, command.RuleIDData{RuleID: uuid.New()}, command.KindNotFound, "", ""),
		tr("tool schema not JSON", command.AddTool, command.ToolDefinition{Name: "t", Description: "d",
			InputSchema: json.RawMessage(`"{not json"`), ServerURI: "https://x.example"}, command.KindValidation, "inputSchema", ""),
		tr("tool schema invalid", command.AddTool, command.ToolDefinition{Name: "t", Description: "d",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":12}}}`), ServerURI: "https://x.example"}, command.KindValidation, "inputSchema", ""),
		tr("tool uri relative", command.AddTool, command.ToolDefinition{Name: "t", Description: "d",
			InputSchema: json.RawMessage(objectSchema), ServerURI: "issues"}, command.KindValidation, "serverUri", ""),
		tr("tool without description", command.AddTool, command.ToolDefinition{Name: "t",
			InputSchema: json.RawMessage(objectSchema), ServerURI: "https://x.example"}, command.KindValidation, "description", ""),
		tr("tool name used", command.AddTool, tool("search_issues"), command.KindConflict, "", "Active"),
		tr("remove an unknown tool", command.RemoveTool, command.ToolNameData{ToolName: "nope"}, command.KindNotFound, "", ""),
		tr("skill added twice", command.AddTemplateSkill, command.SkillData{SkillID: skill}, command.KindConflict, "", "Active"),
		tr("another owner's skill", command.AddTemplateSkill, command.SkillData{SkillID: theirSkill}, command.KindNotFound, "", ""),
		tr("no skill", command.AddTemplateSkill, command.SkillData{}, command.KindValidation, "skillId", ""),
		tr("remove a skill that is no default", command.RemoveTemplateSkill, command.SkillData{SkillID: uuid.New()}, command.KindNotFound, "", ""),
		{name: "another owner's template", aggregate: domain.AggregateTemplate, command: command.AddRule, id: id, owner: uuid.NewString(),
			data: command.RuleData{MatchField: "a", MatchPattern: "b", ClassifyAs: "c"}, kind: command.KindNotFound},
	})

	tmpl = ok[command.TemplateState](t, h, domain.AggregateTemplate, command.RemoveRule, id, command.RuleIDData{RuleID: rule})
	assert.Empty(t, tmpl.ClassificationRules)
	tmpl = ok[command.TemplateState](t, h, domain.AggregateTemplate, command.RemoveTool, id, command.ToolNameData{ToolName: "lint"})
	require.Len(t, tmpl.CustomToolDefinitions, 1)
	tmpl = ok[command.TemplateState](t, h, domain.AggregateTemplate, command.RemoveTemplateSkill, id, command.SkillData{SkillID: skill})
	assert.Empty(t, tmpl.DefaultSkillIDs)
}

func TestActivateAndDeactivateTemplate(t *testing.T) {
	h := startWorker(t, 0)
	id := h.newTemplate(t, templateData())
	assert.False(t, ok[command.TemplateState](t, h, domain.AggregateTemplate, command.DeactivateTemplate, id, nil).IsActive)
	h.checkRefusals(t, []refusalCase{
		{name: "deactivate twice", aggregate: domain.AggregateTemplate, command: command.DeactivateTemplate, id: id, kind: command.KindConflict, status: "Inactive"},
		{name: "another owner's template", aggregate: domain.AggregateTemplate, command: command.ActivateTemplate, id: id, owner: uuid.NewString(), kind: command.KindNotFound},
	})
	assert.True(t, ok[command.TemplateState](t, h, domain.AggregateTemplate, command.ActivateTemplate, id, nil).IsActive)
	h.checkRefusals(t, []refusalCase{
		{name: "activate twice", aggregate: domain.AggregateTemplate, command: command.ActivateTemplate, id: id, kind: command.KindConflict, status: "Active"},
	})
	types := h.outboxTypes(t, id)
	assert.Contains(t, types, "agent_template_deactivated")
	assert.Contains(t, types, "agent_template_activated")
}
