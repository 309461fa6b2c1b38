package reactions_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/handlers/projections"
	"github.com/agentbus/agentbus/handlers/reactions"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

func (f *flow) skill(t *testing.T, id uuid.UUID) *domain.AgentSkill {
	t.Helper()
	sk, err := postgres.Skills{}.Get(context.Background(), f.pool, id)
	require.NoError(t, err)
	return sk
}

func (f *flow) pill(t *testing.T, skill, session uuid.UUID, content string) uuid.UUID {
	t.Helper()
	id := uuid.New()
	f.do(t, domain.AggregateSkill, command.RecordMemoryPill, skill, command.RecordMemoryPillData{
		PillID: id, SessionID: session, Content: content, Category: domain.PillTip})
	return id
}

// endWithText has the session's agent say each text, then end its turn
// with its output awaiting review.
func (f *flow) endWithText(t *testing.T, id uuid.UUID, texts ...string) {
	t.Helper()
	for i, text := range texts {
		f.raw(t, id, protocol.EventAssistantMessage, protocol.AssistantMessage{
			MessageID: uuid.NewString(), BlockType: "text", Text: text})
		require.Eventually(t, func() bool {
			var n int
			require.NoError(t, f.pool.QueryRow(context.Background(),
				"SELECT count(*) FROM agent_messages WHERE session_id = $1", id).Scan(&n))
			return n == i+1
		}, 30*time.Second, 20*time.Millisecond, "transcript of %s", id)
	}
	f.raw(t, id, "session_end", map[string]any{"status": "success", "reason": "completed", "exit_code": 0})
	f.waitStatus(t, id, domain.StatusIdle)
}

// TestApprovedConsolidationConsolidatesTheSkill: approving a consolidation
// session's output makes its last message the skill's instructions, marks
// the pills it was given Consolidated (not one dismissed meanwhile) and
// raises the skill's version by one, once, however often the approval is
// delivered. Approving an ordinary session changes no skill.
func TestApprovedConsolidationConsolidatesTheSkill(t *testing.T) {
	f := startFlow(t, 0)
	f.also(t,
		func(ctx context.Context) error { return projections.NewTranscript(f.pool).Run(ctx, f.js) },
		reactions.Consolidate{JS: f.js, DB: f.pool, Client: f.client}.Run)

	skill := uuid.New()
	f.do(t, domain.AggregateSkill, command.CreateSkill, skill, command.CreateSkillData{
		Name: "go-style", Description: "How we write Go", Instructions: "Write small packages."})
	work := uuid.New()
	f.do(t, domain.AggregateSession, command.StartSession, work, command.StartSessionData{
		WorkingDirectory: "/work/repo", Objective: "Speed up the build", BudgetCapUsd: domain.Dollars(10),
		SkillIDs: []uuid.UUID{skill}})
	f.waitStatus(t, work, domain.StatusRunning)
	kept := f.pill(t, skill, work, "Table tests read best.")
	folded := f.pill(t, skill, work, "Name errors after what failed.")
	dismissed := f.pill(t, skill, work, "Use globals.")

	// An ordinary session's approval is not a consolidation.
	f.endWithText(t, work, "The build is faster.")
	f.do(t, domain.AggregateSession, command.ApproveOutput, work, nil)

	consolidation := uuid.New()
	f.do(t, domain.AggregateSession, command.StartSession, consolidation, command.StartSessionData{
		WorkingDirectory: "/work/repo", Objective: "Skill improvement: fold the pills in.", BudgetCapUsd: domain.Dollars(2),
		SkillIDs:     []uuid.UUID{skill},
		Consolidates: &command.SkillConsolidation{SkillID: skill, PillIDs: []uuid.UUID{kept, folded, dismissed}}})
	f.do(t, domain.AggregateSkill, command.DismissMemoryPill, skill, command.PillData{PillID: dismissed})
	f.waitStatus(t, consolidation, domain.StatusRunning)
	f.endWithText(t, consolidation, "Let me read the pills.", "Write small packages. Prefer table tests. Name errors after what failed.")
	assert.Equal(t, 1, f.skill(t, skill).SkillVersion(), "consolidated before the output was approved")

	f.do(t, domain.AggregateSession, command.ApproveOutput, consolidation, nil)
	require.Eventually(t, func() bool { return f.skill(t, skill).SkillVersion() == 2 }, 30*time.Second, 20*time.Millisecond)
	sk := f.skill(t, skill)
	assert.Equal(t, "Write small packages. Prefer table tests. Name errors after what failed.", sk.Instructions())
	status := map[uuid.UUID]domain.MemoryPillStatus{}
	for _, p := range sk.MemoryPills() {
		status[p.ID] = p.Status
	}
	assert.Equal(t, map[uuid.UUID]domain.MemoryPillStatus{
		kept: domain.PillConsolidated, folded: domain.PillConsolidated, dismissed: domain.PillDismissed}, status)

	// A redelivered approval repeats a command that changes nothing.
	f.republish(t, bus.EventSubject(domain.AggregateSession, consolidation.String(), "agent_session_approved"))
	f.republish(t, bus.EventSubject(domain.AggregateSession, work.String(), "agent_session_approved"))
	require.Eventually(t, bustest.CaughtUp(f.js, bus.StreamEvents, reactions.ConsolidateConsumer),
		30*time.Second, 20*time.Millisecond)
	assert.Equal(t, 2, f.skill(t, skill).SkillVersion())
}

// TestConsolidationSessionMustEnableItsSkillAndActivePills: a session may
// only consolidate a skill it enables, and only that skill's Active pills.
func TestConsolidationSessionMustEnableItsSkillAndActivePills(t *testing.T) {
	f := startFlow(t, 0)
	skill, other := uuid.New(), uuid.New()
	for i, id := range []uuid.UUID{skill, other} {
		f.do(t, domain.AggregateSkill, command.CreateSkill, id, command.CreateSkillData{
			Name: []string{"go-style", "sql-style"}[i], Description: "How we write code"})
	}
	work := f.start(t)
	pill := f.pill(t, skill, work, "Table tests read best.")
	gone := f.pill(t, skill, work, "Use globals.")
	f.do(t, domain.AggregateSkill, command.DismissMemoryPill, skill, command.PillData{PillID: gone})

	for name, c := range map[string]struct {
		enabled []uuid.UUID
		pills   []uuid.UUID
	}{
		"skill not enabled": {[]uuid.UUID{other}, []uuid.UUID{pill}},
		"no pills":          {[]uuid.UUID{skill}, nil},
		"dismissed pill":    {[]uuid.UUID{skill}, []uuid.UUID{pill, gone}},
		"unknown pill":      {[]uuid.UUID{skill}, []uuid.UUID{uuid.New()}},
	} {
		t.Run(name, func(t *testing.T) {
			id := uuid.New()
			cmd, err := command.New(domain.AggregateSession, command.StartSession, id, f.owner.String(), command.StartSessionData{
				WorkingDirectory: "/work/repo", Objective: "Skill improvement", BudgetCapUsd: domain.Dollars(2),
				SkillIDs: c.enabled, Consolidates: &command.SkillConsolidation{SkillID: skill, PillIDs: c.pills}})
			require.NoError(t, err)
			r, err := f.client.Do(context.Background(), cmd)
			require.NoError(t, err)
			e, ok := command.AsError(r.Err())
			require.True(t, ok, "refused")
			assert.Equal(t, command.KindValidation, e.Kind)
			_, err = postgres.Sessions{}.Get(context.Background(), f.pool, id)
			assert.ErrorIs(t, err, postgres.ErrNotFound, "no session is left behind")
		})
	}
}
