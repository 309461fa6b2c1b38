package domain_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
)

func TestQuestionAndPlanFlow(t *testing.T) {
	t.Parallel()
	s := runningSession(t)
	require.ErrorIs(t, s.RecordUserQuestionAsked("", nil, t0), domain.ErrValidation)
	require.NoError(t, s.RecordUserQuestionAsked("Postgres or SQLite?", []string{"Postgres", "SQLite"}, t0))
	q := s.PendingQuestion()
	require.NotNil(t, q)
	assert.Equal(t, t0.Add(domain.DefaultInputTimeout), q.ExpiresAt)
	require.NoError(t, s.RecordUserQuestionAnswered("Postgres", t0))
	assert.Nil(t, s.PendingQuestion())

	require.NoError(t, s.RecordPlanCreated("", t0))
	require.NoError(t, s.RecordPlanPendingApproval("v1", true, t0))
	assert.Equal(t, domain.StatusWaitingForApproval, s.Status())
	require.ErrorIs(t, s.RecordPlanRejected("", t0), domain.ErrValidation)
	require.NoError(t, s.RecordPlanRejected("add a migration step", t0))
	assert.Equal(t, domain.PlanRejected, s.Plan().Status)
	assert.Equal(t, 1, s.Plan().Version)
	require.NoError(t, s.RecordPlanPendingApproval("v2", true, t0))
	assert.Equal(t, 2, s.Plan().Version, "each submission after the first is a new version")
	require.NoError(t, s.RecordPlanApproved(t0.Add(5)))
	assert.Equal(t, domain.PlanApproved, s.Plan().Status)
	assert.Equal(t, t0.Add(5), *s.Plan().ApprovedAt)
	assert.Equal(t, "v2", s.Plan().Content)

	require.NoError(t, s.RecordPlanPendingApproval("v3", false, t0))
	assert.Equal(t, domain.StatusRunning, s.Status(), "without required approval the session keeps running")
	assert.Equal(t, domain.PlanApproved, s.Plan().Status)
	assert.Equal(t, 3, s.Plan().Version)

	events := eventTypes(s.PopEvents())
	assert.Equal(t, []string{"session_waiting_for_input", "session_input_received", "session_plan_created",
		"session_plan_pending_approval", "session_plan_rejected", "session_plan_pending_approval", "session_plan_approved",
		"session_plan_pending_approval", "session_plan_approved"}, events)
}

func TestPlanDecisionNeedsAPendingPlan(t *testing.T) {
	t.Parallel()
	snap := snapshotIn(t, domain.StatusWaitingForApproval)
	snap.Plan = nil
	snap.PendingPermission = &domain.PermissionRequest{RequestID: "r", ToolName: "Bash", Input: "{}", AskedAt: t0, ExpiresAt: t0}
	s := load(t, snap)
	require.ErrorIs(t, s.RecordPlanApproved(t0), domain.ErrNoPlanPendingApproval)
	require.ErrorIs(t, s.RecordPlanRejected("x", t0), domain.ErrNoPlanPendingApproval)
}

func TestTaskListIsReplaced(t *testing.T) {
	t.Parallel()
	s := runningSession(t)
	first := []domain.SessionTask{{ID: "1", Subject: "a", Status: domain.TaskCompleted}, {ID: "2", Subject: "b", Status: domain.TaskInProgress, ActiveForm: "doing b"}}
	require.NoError(t, s.UpdateSessionTaskList(first, t0))
	require.NoError(t, s.UpdateSessionTaskList([]domain.SessionTask{{ID: "3", Subject: "c", Status: domain.TaskPending}}, t0.Add(1)))
	l := s.TaskList()
	require.NotNil(t, l)
	assert.Len(t, l.Tasks, 1, "the list is replaced, never merged")
	assert.Equal(t, t0.Add(1), l.LastUpdatedAt)
	events := s.PopEvents()
	e := events[0].(domain.SessionTaskListUpdatedEvent)
	assert.Equal(t, 2, e.TaskCount)
	assert.Equal(t, 1, e.CompletedCount)

	for name, bad := range map[string][]domain.SessionTask{
		"duplicate id":   {{ID: "1", Subject: "a", Status: domain.TaskPending}, {ID: "1", Subject: "b", Status: domain.TaskPending}},
		"no subject":     {{ID: "1", Status: domain.TaskPending}},
		"unknown status": {{ID: "1", Subject: "a", Status: "Blocked"}},
	} {
		require.ErrorIs(t, s.UpdateSessionTaskList(bad, t0), domain.ErrValidation, name)
	}
}

func TestSkillsOnSession(t *testing.T) {
	t.Parallel()
	snap := snapshotIn(t, domain.StatusIdle)
	s := load(t, snap)
	skill := mustSkill(t, uuid.New(), "go", "Use gofmt.")
	require.ErrorIs(t, s.ConfirmReloaded(uuid.New(), t0), domain.ErrNoReloadPending)
	require.NoError(t, s.EnableSkill(skill, t0))
	assert.True(t, s.ReloadPending(), "enabling a skill asks the sidecar to reload")
	events := s.PopEvents()
	require.Len(t, events, 2)
	reload := events[1].(domain.SessionReloadRequestedEvent)
	assert.Equal(t, awaited(t, s, domain.SidecarReload), reload.CommandID, "the event names the command whose ack is awaited")
	require.ErrorIs(t, s.EnableSkill(skill, t0), domain.ErrSkillAlreadyEnabled)

	inactive := mustSkill(t, uuid.New(), "old", "")
	require.NoError(t, inactive.Deactivate(t0))
	require.ErrorIs(t, s.EnableSkill(inactive, t0), domain.ErrSkillInactive)

	other, err := domain.NewAgentSkill(uuid.New(), uuid.New(), "theirs", "x", "", nil, nil, t0)
	require.NoError(t, err)
	require.ErrorIs(t, s.EnableSkill(other, t0), domain.ErrNotFound, "another owner's skill does not exist for this owner")

	require.NoError(t, s.RequestReload(t0))
	assert.True(t, s.ReloadPending())
	require.ErrorIs(t, s.ConfirmReloaded(reload.CommandID, t0), domain.ErrUnexpectedAck, "asking again supersedes the first reload")
	require.NoError(t, s.BeginTurn(t0))
	require.NoError(t, s.ConfirmReloaded(awaited(t, s, domain.SidecarReload), t0), "the ack may arrive after the next turn began")
	assert.False(t, s.ReloadPending())

	require.ErrorIs(t, s.DisableSkill(skill.ID(), t0), domain.ErrInvalidTransition, "skills change only between turns")
	require.NoError(t, s.RecordTurnCompleted(t0))
	require.NoError(t, s.DisableSkill(skill.ID(), t0))
	require.ErrorIs(t, s.DisableSkill(skill.ID(), t0), domain.ErrSkillNotEnabled)
	assert.Empty(t, s.EnabledSkillIDs())
}
