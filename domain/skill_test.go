package domain_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
)

func TestAgentSkillDefinitions(t *testing.T) {
	t.Parallel()
	s := mustSkill(t, uuid.New(), "testing", "Write table tests.", mustTool(t, "run_tests"))
	assert.Equal(t, 1, s.SkillVersion())
	require.ErrorIs(t, s.AddToolDefinition(mustTool(t, "run_tests"), t0), domain.ErrDuplicate, "tool names are unique in a skill")
	require.NoError(t, s.AddToolDefinition(mustTool(t, "coverage"), t0))
	require.NoError(t, s.RemoveToolDefinition("run_tests", t0))
	require.ErrorIs(t, s.RemoveToolDefinition("run_tests", t0), domain.ErrNotFound)

	sub := domain.SkillSubAgentDefinition{Name: "test-runner", Description: "runs tests", ModelID: "claude-haiku-4-5"}
	require.NoError(t, s.AddSubAgentDefinition(sub, t0))
	require.ErrorIs(t, s.AddSubAgentDefinition(sub, t0), domain.ErrDuplicate, "subagent names are unique in a skill")
	require.ErrorIs(t, s.AddSubAgentDefinition(domain.SkillSubAgentDefinition{Name: "", ModelID: "m"}, t0), domain.ErrValidation)
	require.NoError(t, s.RemoveSubAgentDefinition("test-runner", t0))

	require.NoError(t, s.UpdateInstructions("Prefer fakes to mocks.", false, t0))
	assert.Equal(t, 1, s.SkillVersion(), "a manual edit keeps the version")
	require.NoError(t, s.UpdateDetails("testing-go", "", t0))
	assert.Equal(t, "testing-go", s.Name())
	assert.Equal(t, "a skill", s.Description())

	require.NoError(t, s.Deactivate(t0))
	require.ErrorIs(t, s.Deactivate(t0), domain.ErrInvalidTransition)
	require.NoError(t, s.Activate(t0))
	require.ErrorIs(t, s.Activate(t0), domain.ErrInvalidTransition)

	_, err := domain.NewAgentSkill(uuid.New(), ownerID, strings.Repeat("n", 101), "d", "", nil, nil, t0)
	require.ErrorIs(t, err, domain.ErrValidation)
	_, err = domain.NewAgentSkill(uuid.New(), ownerID, "n", "d", "", []domain.MCPToolDefinition{mustTool(t, "a"), mustTool(t, "a")}, nil, t0)
	require.ErrorIs(t, err, domain.ErrValidation)
}

func TestMemoryPills(t *testing.T) {
	t.Parallel()
	s := mustSkill(t, uuid.New(), "go", "Use gofmt.")
	ids := seqIDs()
	a, b, c := ids(), ids(), ids()
	for _, id := range []uuid.UUID{a, b, c} {
		p, err := s.RecordMemoryPill(id, sessionID, "go vet before commit", domain.PillTip, t0)
		require.NoError(t, err)
		assert.Equal(t, domain.PillActive, p.Status)
	}
	_, err := s.RecordMemoryPill(a, sessionID, "dup", domain.PillTip, t0)
	require.ErrorIs(t, err, domain.ErrDuplicate)
	_, err = s.RecordMemoryPill(ids(), sessionID, strings.Repeat("x", 2001), domain.PillTip, t0)
	require.ErrorIs(t, err, domain.ErrValidation)
	_, err = s.RecordMemoryPill(ids(), sessionID, "x", "Gossip", t0)
	require.ErrorIs(t, err, domain.ErrValidation)

	require.NoError(t, s.DismissMemoryPill(c, t0))
	require.ErrorIs(t, s.DismissMemoryPill(c, t0), domain.ErrInvalidTransition, "dismissed is terminal")
	require.ErrorIs(t, s.DismissMemoryPill(ids(), t0), domain.ErrNotFound)

	err = s.ConsolidateMemoryPills([]uuid.UUID{a, c}, "new", t0)
	require.ErrorIs(t, err, domain.ErrInvalidTransition, "only Active pills are consolidated")
	assert.Equal(t, 1, s.SkillVersion(), "all or nothing")
	assert.Equal(t, 2, s.ActivePillCount())

	s.PopEvents()
	require.NoError(t, s.ConsolidateMemoryPills([]uuid.UUID{a, b}, "Use gofmt. Run go vet.", t0.Add(1)))
	assert.Equal(t, 2, s.SkillVersion(), "consolidation bumps the version by one")
	assert.Equal(t, "Use gofmt. Run go vet.", s.Instructions())
	for _, p := range s.MemoryPills()[:2] {
		assert.Equal(t, domain.PillConsolidated, p.Status)
		require.NotNil(t, p.ConsolidatedAt)
	}
	require.ErrorIs(t, s.ConsolidateMemoryPills([]uuid.UUID{a}, "x", t0), domain.ErrInvalidTransition, "consolidated is terminal")
	events := s.PopEvents()
	assert.Equal(t, []string{"agent_skill_instructions_updated", "skill_consolidated"}, eventTypes(events))
	e := events[1].(domain.SkillConsolidatedEvent)
	assert.Equal(t, 2, e.NewVersion)
	assert.Equal(t, 2, e.ConsolidatedPillCount)

	re, err := domain.UnmarshalAgentSkillFromDatabase(s.Snapshot())
	require.NoError(t, err)
	assert.Equal(t, s.Snapshot(), re.Snapshot())
}
