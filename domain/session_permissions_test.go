package domain_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
)

func sessionWithPolicy(t *testing.T, policy domain.ToolApprovalPolicy) *domain.AgentSession {
	t.Helper()
	p := newSessionParams()
	p.ToolApproval = &policy
	s, err := domain.NewAgentSession(p)
	require.NoError(t, err)
	_, err = s.GenerateAPIKey(entropy())
	require.NoError(t, err)
	require.NoError(t, s.Start(t0))
	s.PopEvents()
	return s
}

func TestToolPermissionPolicy(t *testing.T) {
	t.Parallel()
	list := domain.ToolApprovalPolicy{Mode: domain.ApprovalList, Tools: []string{"Bash", "Write"}, Timeout: time.Minute, OnTimeout: domain.TimeoutDeny}
	all := domain.ToolApprovalPolicy{Mode: domain.ApprovalAll, Timeout: time.Minute, OnTimeout: domain.TimeoutDeny}
	tests := []struct {
		name       string
		policy     domain.ToolApprovalPolicy
		tool       string
		want       domain.PermissionDecision
		wantStatus domain.SessionStatus
		wantEvent  string
	}{
		{"none asks nothing", domain.DefaultToolApprovalPolicy(), "Bash", domain.PermissionAllow, domain.StatusRunning, "tool_permission_granted"},
		{"all asks for everything", all, "Read", domain.PermissionPending, domain.StatusWaitingForApproval, "tool_permission_requested"},
		{"listed tool waits", list, "Bash", domain.PermissionPending, domain.StatusWaitingForApproval, "tool_permission_requested"},
		{"unlisted tool runs", list, "Read", domain.PermissionAllow, domain.StatusRunning, "tool_permission_granted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := sessionWithPolicy(t, tt.policy)
			d, err := s.RequestToolPermission("req-1", tt.tool, `{"command":"rm -rf /tmp/x"}`, t0)
			require.NoError(t, err)
			assert.Equal(t, tt.want, d)
			assert.Equal(t, tt.wantStatus, s.Status())
			assert.Equal(t, []string{tt.wantEvent}, eventTypes(s.PopEvents()))
		})
	}
}

func TestToolPermissionDecisions(t *testing.T) {
	t.Parallel()
	all := domain.ToolApprovalPolicy{Mode: domain.ApprovalAll, Timeout: 2 * time.Minute, OnTimeout: domain.TimeoutDeny}
	s := sessionWithPolicy(t, all)
	_, err := s.RequestToolPermission("req-1", "Bash", `{"command":"ls"}`, t0)
	require.NoError(t, err)
	p := s.PendingPermission()
	require.NotNil(t, p)
	assert.Equal(t, domain.PermissionRequest{RequestID: "req-1", ToolName: "Bash", Input: `{"command":"ls"}`, AskedAt: t0, ExpiresAt: t0.Add(2 * time.Minute)}, *p)
	_, err = s.RequestToolPermission("req-2", "Bash", `{}`, t0)
	require.ErrorIs(t, err, domain.ErrInvalidTransition, "one request at a time")

	require.ErrorIs(t, s.ApproveToolPermission("other", "", t0), domain.ErrNoPendingPermission)
	require.NoError(t, s.DenyToolPermission("req-1", "use the API instead", t0))
	assert.Equal(t, domain.StatusRunning, s.Status())
	assert.Nil(t, s.PendingPermission())
	events := s.PopEvents()
	denied := events[len(events)-1].(domain.ToolPermissionDeniedEvent)
	assert.Equal(t, "use the API instead", denied.Message)
	assert.Equal(t, domain.DecidedByUser, denied.DecidedBy)

	_, err = s.RequestToolPermission("req-3", "Write", `{}`, t0)
	require.NoError(t, err)
	require.NoError(t, s.ApproveToolPermission("req-3", "", t0))
	granted := s.PopEvents()[1].(domain.ToolPermissionGrantedEvent)
	assert.Equal(t, "req-3", granted.RequestID)

	_, err = s.RequestToolPermission("req-4", "Write", `not json`, t0)
	require.ErrorIs(t, err, domain.ErrValidation)
}

func TestToolPermissionWhileStopping(t *testing.T) {
	t.Parallel()
	s := sessionWithPolicy(t, domain.ToolApprovalPolicy{Mode: domain.ApprovalAll, Timeout: time.Minute, OnTimeout: domain.TimeoutAllow})
	require.NoError(t, s.RequestPause(t0))
	s.PopEvents()
	d, err := s.RequestToolPermission("req-1", "Bash", `{}`, t0)
	require.NoError(t, err)
	assert.Equal(t, domain.PermissionDeny, d, "a session being paused does not wait on a question")
	assert.Equal(t, domain.StatusPausing, s.Status())
	e := s.PopEvents()[0].(domain.ToolPermissionDeniedEvent)
	assert.Equal(t, domain.DecidedBySessionStopping, e.DecidedBy)
}

func TestTimeouts(t *testing.T) {
	t.Parallel()
	policy := func(b domain.PermissionTimeoutBehavior) domain.ToolApprovalPolicy {
		return domain.ToolApprovalPolicy{Mode: domain.ApprovalAll, Timeout: 2 * time.Minute, OnTimeout: b}
	}
	tests := []struct {
		name       string
		policy     domain.ToolApprovalPolicy
		timeouts   domain.SessionTimeouts
		setup      func(*domain.AgentSession)
		deadline   time.Time
		wantStatus domain.SessionStatus
		wantEvents []string
	}{
		{
			name: "question with default answer", policy: domain.DefaultToolApprovalPolicy(),
			timeouts: domain.SessionTimeouts{Input: time.Hour, Pause: time.Hour, DefaultAnswer: "choose the simplest"},
			setup:    func(s *domain.AgentSession) { require.NoError(t, s.RecordUserQuestionAsked("A or B?", nil, t0)) },
			deadline: t0.Add(time.Hour), wantStatus: domain.StatusRunning,
			wantEvents: []string{"session_input_timed_out", "session_input_received"},
		},
		{
			name: "question without default answer (24 h default)", policy: domain.DefaultToolApprovalPolicy(),
			timeouts: domain.DefaultSessionTimeouts(),
			setup:    func(s *domain.AgentSession) { require.NoError(t, s.RecordUserQuestionAsked("A or B?", nil, t0)) },
			deadline: t0.Add(24 * time.Hour), wantStatus: domain.StatusFailed,
			wantEvents: []string{"session_input_timed_out", "agent_session_failed"},
		},
		{
			name: "permission denied by default", policy: policy(domain.TimeoutDeny), timeouts: domain.DefaultSessionTimeouts(),
			setup: func(s *domain.AgentSession) {
				_, err := s.RequestToolPermission("r", "Bash", "{}", t0)
				require.NoError(t, err)
			},
			deadline: t0.Add(2 * time.Minute), wantStatus: domain.StatusRunning,
			wantEvents: []string{"tool_permission_timed_out", "tool_permission_denied"},
		},
		{
			name: "permission allowed on timeout", policy: policy(domain.TimeoutAllow), timeouts: domain.DefaultSessionTimeouts(),
			setup: func(s *domain.AgentSession) {
				_, err := s.RequestToolPermission("r", "Bash", "{}", t0)
				require.NoError(t, err)
			},
			deadline: t0.Add(2 * time.Minute), wantStatus: domain.StatusRunning,
			wantEvents: []string{"tool_permission_timed_out", "tool_permission_granted"},
		},
		{
			name: "permission timeout fails the session", policy: policy(domain.TimeoutFail), timeouts: domain.DefaultSessionTimeouts(),
			setup: func(s *domain.AgentSession) {
				_, err := s.RequestToolPermission("r", "Bash", "{}", t0)
				require.NoError(t, err)
			},
			deadline: t0.Add(2 * time.Minute), wantStatus: domain.StatusFailed,
			wantEvents: []string{"tool_permission_timed_out", "agent_session_failed"},
		},
		{
			name: "pause times out (10 min default)", policy: domain.DefaultToolApprovalPolicy(), timeouts: domain.DefaultSessionTimeouts(),
			setup: func(s *domain.AgentSession) {
				require.NoError(t, s.RequestPause(t0))
				require.NoError(t, s.ConfirmPaused(awaited(t, s, domain.SidecarPause), t0))
			},
			deadline: t0.Add(10 * time.Minute), wantStatus: domain.StatusFailed,
			wantEvents: []string{"session_pause_timed_out", "agent_session_failed"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newSessionParams()
			p.ToolApproval, p.Timeouts = &tt.policy, &tt.timeouts
			s, err := domain.NewAgentSession(p)
			require.NoError(t, err)
			_, err = s.GenerateAPIKey(entropy())
			require.NoError(t, err)
			require.NoError(t, s.Start(t0))
			tt.setup(s)
			s.PopEvents()

			deadline, ok := s.NextDeadline()
			require.True(t, ok)
			assert.Equal(t, tt.deadline, deadline)

			err = s.ExpireTimeouts(deadline.Add(-time.Nanosecond))
			require.ErrorIs(t, err, domain.ErrNoTimeoutDue, "too early does nothing")
			require.ErrorIs(t, err, domain.ErrConflict)
			assert.Empty(t, s.PopEvents())

			require.NoError(t, s.ExpireTimeouts(deadline))
			assert.Equal(t, tt.wantStatus, s.Status())
			assert.Equal(t, tt.wantEvents, eventTypes(s.PopEvents()))
			if tt.wantStatus == domain.StatusFailed {
				assert.Equal(t, domain.FailureTimeout, s.Failure().Reason)
			}

			_, ok = s.NextDeadline()
			assert.False(t, ok)
			require.ErrorIs(t, s.ExpireTimeouts(deadline.Add(time.Hour)), domain.ErrNoTimeoutDue, "late calls find nothing to do")
		})
	}
}

func TestPauseTimeoutRestartsWithEachPause(t *testing.T) {
	t.Parallel()
	s := runningSession(t)
	require.NoError(t, s.RequestPause(t0))
	require.NoError(t, s.ConfirmPaused(awaited(t, s, domain.SidecarPause), t0))
	require.NoError(t, s.RequestResume(t0.Add(time.Minute)))
	require.NoError(t, s.ConfirmResumed(awaited(t, s, domain.SidecarResume), t0.Add(time.Minute)))
	require.NoError(t, s.RequestPause(t0.Add(5*time.Minute)))
	require.NoError(t, s.ConfirmPaused(awaited(t, s, domain.SidecarPause), t0.Add(5*time.Minute)))
	require.ErrorIs(t, s.ExpirePause(t0.Add(10*time.Minute)), domain.ErrNoTimeoutDue, "a timer of an earlier pause does not fail this one")
	require.NoError(t, s.ExpirePause(t0.Add(15*time.Minute)))
}

func TestPlanApprovalHasNoTimeout(t *testing.T) {
	t.Parallel()
	s := load(t, snapshotIn(t, domain.StatusWaitingForApproval))
	_, ok := s.NextDeadline()
	assert.False(t, ok, "a plan waits for its owner without a deadline")
	require.ErrorIs(t, s.ExpireTimeouts(t0.Add(365*24*time.Hour)), domain.ErrNoTimeoutDue)
	require.ErrorIs(t, s.ExpireToolPermission(t0.Add(time.Hour)), domain.ErrNoTimeoutDue)
	assert.Equal(t, domain.StatusWaitingForApproval, s.Status())
}
