package reactions_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/handlers/reactions"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/sidecar/launcher"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

const ordersSchema = `{"type":"object","properties":{"number":{"type":"string"}}}`

// newSkill creates an active skill of the flow's owner.
func (f *flow) newSkill(t *testing.T, name, instructions string, tools []command.ToolDefinition, subs []command.SubAgentDefinition) uuid.UUID {
	t.Helper()
	id := uuid.New()
	f.do(t, domain.AggregateSkill, command.CreateSkill, id, command.CreateSkillData{
		Name: name + " " + id.String()[:8], Description: name, Instructions: instructions,
		ToolDefinitions: tools, SubAgentDefinitions: subs})
	return id
}

// configured starts a session of a template with a system prompt, an
// allowed tool and an MCP tool, and two skills: one with instructions and
// a subagent, one with instructions and a tool of its own.
func (f *flow) configured(t *testing.T) (session, extra uuid.UUID) {
	t.Helper()
	tests := f.newSkill(t, "Tests first", "Write the test before the code.", nil,
		[]command.SubAgentDefinition{{Name: "reviewer", ModelID: "claude-haiku-4-5", Instructions: "Review the diff."}})
	small := f.newSkill(t, "Small commits", "Keep each commit small.",
		[]command.ToolDefinition{{Name: "open_pr", Description: "Opens a pull request.", InputSchema: json.RawMessage(ordersSchema), ServerURI: "https://git.example/mcp"}}, nil)
	extra = f.newSkill(t, "Haiku", "Answer in haiku.", nil, nil)
	template := uuid.New()
	f.do(t, domain.AggregateTemplate, command.CreateTemplate, template, command.CreateTemplateData{
		Name: "Orders " + template.String()[:8], ModelID: "claude-sonnet-4-5", SystemPrompt: "You work on the orders service.",
		AllowedTools: []string{"Read"}, DefaultBudgetCapUsd: domain.Dollars(10), DefaultSkillIDs: []uuid.UUID{tests},
		CustomToolDefinitions: []command.ToolDefinition{{Name: "lookup_order", Description: "Looks an order up.",
			InputSchema: json.RawMessage(ordersSchema), ServerURI: "https://orders.example/mcp"}}})
	session = uuid.New()
	f.do(t, domain.AggregateSession, command.StartSession, session, command.StartSessionData{
		WorkingDirectory: t.TempDir(), Objective: "Speed up the order lookup", TemplateID: &template,
		SkillIDs: []uuid.UUID{small}, BudgetCapUsd: domain.Dollars(10)})
	return session, extra
}

func toolNames(tools []protocol.MCPTool) []string {
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name+"@"+tool.ServerURI)
	}
	return names
}

func TestTheRuntimeStartsTheSidecarWithTheComposedConfig(t *testing.T) {
	f := startFlow(t, 0)
	rdb := testenv.Redis(t)
	l, err := launcher.New(launcher.Config{Mode: launcher.ModeExternal, Redis: rdb, Name: "config-test-" + uuid.NewString()[:8]})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = reactions.Runtime{JS: f.js, DB: f.pool, Launcher: l, Client: f.client}.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })

	id, _ := f.configured(t)
	var raw []byte
	require.Eventually(t, func() bool {
		raw, err = rdb.Get(context.Background(), protocol.ConfigKey(id.String())).Bytes()
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "the runtime stores the sidecar's config")
	cfg, err := protocol.ParseConfig(raw)
	require.NoError(t, err)

	assert.Equal(t, "You work on the orders service.\n\nWrite the test before the code.\n\nKeep each commit small.", cfg.SystemPrompt,
		"the template's prompt, then each skill's instructions in order")
	assert.Equal(t, []string{"Read", "lookup_order", "open_pr"}, cfg.AllowedTools)
	assert.Equal(t, []string{"lookup_order@https://orders.example/mcp", "open_pr@https://git.example/mcp"}, toolNames(cfg.MCPTools))
	assert.JSONEq(t, ordersSchema, string(cfg.MCPTools[0].InputSchema))
	require.Len(t, cfg.Subagents, 1)
	assert.Equal(t, protocol.Subagent{Name: "reviewer", Model: "claude-haiku-4-5", Instructions: "Review the diff."}, cfg.Subagents[0])
	assert.Equal(t, "Speed up the order lookup", cfg.Objective)
}

func TestEnablingASkillReloadsTheSidecarWithTheNewConfig(t *testing.T) {
	f := startFlow(t, 0)
	id, extra := f.configured(t)
	f.waitStatus(t, id, domain.StatusRunning)
	f.raw(t, id, "session_end", map[string]any{"status": "success", "reason": "completed", "exit_code": 0})
	f.waitStatus(t, id, domain.StatusIdle)

	f.do(t, domain.AggregateSession, command.EnableSkill, id, command.SkillData{SkillID: extra})
	got := f.waitSidecarCommand(t, id, protocol.CommandReloadConfig, 1)
	var reload protocol.ReloadConfig
	require.NoError(t, json.Unmarshal(got[0], &reload))
	require.NotNil(t, reload.Config)
	assert.Equal(t, "You work on the orders service.\n\nWrite the test before the code.\n\nKeep each commit small.\n\nAnswer in haiku.",
		reload.Config.SystemPrompt, "the enabled skill's instructions come last")
	assert.Equal(t, id.String(), reload.Config.SessionID)
	assert.Empty(t, reload.Config.Engine, "the sidecar keeps its engine")
	assert.True(t, f.session(t, id).ReloadPending())

	f.do(t, domain.AggregateSession, command.DisableSkill, id, command.SkillData{SkillID: extra})
	got = f.waitSidecarCommand(t, id, protocol.CommandReloadConfig, 2)
	require.NoError(t, json.Unmarshal(got[1], &reload))
	assert.NotContains(t, reload.Config.SystemPrompt, "Answer in haiku.")

	f.do(t, domain.AggregateSession, command.ReloadSession, id, nil)
	f.waitSidecarCommand(t, id, protocol.CommandReloadConfig, 3)
}

func (f *flow) session(t *testing.T, id uuid.UUID) *domain.AgentSession {
	t.Helper()
	s, err := postgres.Sessions{}.Get(context.Background(), f.pool, id)
	require.NoError(t, err)
	return s
}
