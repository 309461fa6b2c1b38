package domain_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
)

func TestComposeConfig(t *testing.T) {
	t.Parallel()
	ids := seqIDs()
	p := templateParams()
	p.CustomTools = []domain.MCPToolDefinition{mustTool(t, "search")}
	p.PlanApprovalRequired = true
	tmpl, err := domain.NewAgentTemplate(p)
	require.NoError(t, err)

	searchFromSkill := mustTool(t, "search")
	searchFromSkill.Description = "the skill's search, shadowed by the template's"
	first := mustSkill(t, ids(), "first", "Be brief.", searchFromSkill, mustTool(t, "lint"))
	require.NoError(t, first.AddSubAgentDefinition(domain.SkillSubAgentDefinition{Name: "runner", Description: "first", ModelID: "m"}, t0))
	second := mustSkill(t, ids(), "second", "Write tests first.", mustTool(t, "lint"), mustTool(t, "fmt"))
	require.NoError(t, second.AddSubAgentDefinition(domain.SkillSubAgentDefinition{Name: "runner", Description: "second", ModelID: "m"}, t0))
	empty := mustSkill(t, ids(), "empty", "")

	sp := newSessionParams()
	sp.EnabledSkillIDs = []uuid.UUID{second.ID(), empty.ID(), first.ID()}
	s, err := domain.NewSessionFromTemplate(sp, tmpl, []*domain.AgentSkill{first, second, empty})
	require.NoError(t, err)

	cfg, err := s.ComposeConfig(tmpl, []*domain.AgentSkill{first, second, empty})
	require.NoError(t, err)
	assert.Equal(t, "You write Go.\n\nWrite tests first.\n\nBe brief.", cfg.SystemPrompt, "template prompt, then skills in enabled order")
	names := func(tools []domain.MCPToolDefinition) []string {
		var out []string
		for _, t := range tools {
			out = append(out, t.Name)
		}
		return out
	}
	assert.Equal(t, []string{"search", "lint", "fmt"}, names(cfg.MCPTools))
	assert.Equal(t, "does search", cfg.MCPTools[0].Description, "the template's tool wins over a skill's")
	require.Len(t, cfg.SubAgents, 1)
	assert.Equal(t, "second", cfg.SubAgents[0].Description, "the earlier enabled skill wins")
	assert.Equal(t, []string{"Read", "Edit", "Bash", "search", "lint", "fmt"}, cfg.AllowedTools)
	assert.True(t, cfg.PlanApprovalRequired)
	assert.Equal(t, "claude-sonnet-4-6", cfg.ModelID)

	_, err = s.ComposeConfig(tmpl, []*domain.AgentSkill{first})
	require.ErrorIs(t, err, domain.ErrNotFound, "every enabled skill must be given")
}

func TestNewSessionFromTemplate(t *testing.T) {
	t.Parallel()
	ids := seqIDs()
	def := mustSkill(t, ids(), "default", "d")
	extra := mustSkill(t, ids(), "extra", "e")
	p := templateParams()
	p.DefaultSkillIDs = []uuid.UUID{def.ID()}
	tmpl, err := domain.NewAgentTemplate(p)
	require.NoError(t, err)

	sp := newSessionParams()
	sp.ModelID, sp.Budget = "", domain.SessionBudget{}
	sp.EnabledSkillIDs = []uuid.UUID{extra.ID(), def.ID()}
	s, err := domain.NewSessionFromTemplate(sp, tmpl, []*domain.AgentSkill{def, extra})
	require.NoError(t, err)
	assert.Equal(t, []uuid.UUID{def.ID(), extra.ID()}, s.EnabledSkillIDs(), "template defaults first, no duplicates")
	assert.Equal(t, "claude-opus-4-6", s.ModelID(), "the template's model by default")
	assert.Equal(t, domain.Dollars(5), s.Budget().HardCapUsd, "the template's budget by default")
	assert.Equal(t, tmpl.ID(), *s.TemplateID())

	require.NoError(t, extra.Deactivate(t0))
	_, err = domain.NewSessionFromTemplate(sp, tmpl, []*domain.AgentSkill{def, extra})
	require.ErrorIs(t, err, domain.ErrSkillInactive)
	_, err = domain.NewSessionFromTemplate(sp, tmpl, []*domain.AgentSkill{extra})
	require.ErrorIs(t, err, domain.ErrNotFound)

	require.NoError(t, tmpl.Deactivate(t0))
	_, err = domain.NewSessionFromTemplate(newSessionParams(), tmpl, []*domain.AgentSkill{def})
	require.ErrorIs(t, err, domain.ErrTemplateInactive)

	sp = newSessionParams()
	sp.OwnerID = uuid.New()
	_, err = domain.NewSessionFromTemplate(sp, tmpl, nil)
	require.ErrorIs(t, err, domain.ErrNotFound, "another owner's template does not exist")
}
