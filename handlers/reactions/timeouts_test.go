package reactions_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/handlers/reactions"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// timeouts runs n copies of the timeout worker, each looking often.
func (f *flow) timeouts(t *testing.T, n int) {
	t.Helper()
	for range n {
		f.also(t, reactions.Timeouts{DB: f.pool, Client: f.client, Interval: 20 * time.Millisecond}.Run)
	}
}

// eventCount counts the published events of one type of the session.
func (f *flow) eventCount(t *testing.T, id uuid.UUID, typ string) int {
	t.Helper()
	subject := bus.EventSubject(domain.AggregateSession, id.String(), typ)
	stream, err := f.js.Stream(context.Background(), bus.StreamEvents)
	require.NoError(t, err)
	info, err := stream.Info(context.Background(), jetstream.WithSubjectFilter(subject))
	require.NoError(t, err)
	return int(info.State.Subjects[subject])
}

// waitEvents waits until the session published n events of one type.
func (f *flow) waitEvents(t *testing.T, id uuid.UUID, typ string, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return f.eventCount(t, id, typ) >= n }, 30*time.Second, 20*time.Millisecond,
		"%s never published %d %s", id, n, typ)
}

// startTimed starts a running session of a template whose questions and
// pauses time out quickly.
func (f *flow) startTimed(t *testing.T, timeouts domain.SessionTimeouts) uuid.UUID {
	t.Helper()
	template := uuid.New()
	f.do(t, domain.AggregateTemplate, command.CreateTemplate, template, command.CreateTemplateData{
		Name: "Quick " + template.String()[:8], ModelID: "claude-sonnet-4-5", AllowedTools: []string{"Read", "Bash"},
		DefaultBudgetCapUsd: domain.Dollars(10), Timeouts: &timeouts})
	id := uuid.New()
	f.do(t, domain.AggregateSession, command.StartSession, id, command.StartSessionData{
		WorkingDirectory: "/work/repo", Objective: "Speed up the build", TemplateID: &template, BudgetCapUsd: domain.Dollars(10)})
	f.waitStatus(t, id, domain.StatusRunning)
	return id
}

func (f *flow) ask(t *testing.T, id uuid.UUID) {
	t.Helper()
	f.raw(t, id, "assistant_message", map[string]any{"message_id": "m1", "block_type": "tool_use", "tool_use_id": "t1",
		"tool_name": "AskUserQuestion", "input": map[string]any{"question": "Which branch?", "options": []string{"main", "dev"}}})
	// The wait may be shorter than a poll: its event is what stays.
	f.waitEvents(t, id, "session_waiting_for_input", 1)
}

func TestAnUndecidedPermissionExpiresOnceAcrossTwoWorkers(t *testing.T) {
	f := startFlow(t, 0)
	f.timeouts(t, 2)
	id := f.startWith(t, &domain.ToolApprovalPolicy{Mode: domain.ApprovalAll, Timeout: 300 * time.Millisecond, OnTimeout: domain.TimeoutDeny})
	f.waitStatus(t, id, domain.StatusRunning)
	f.raw(t, id, "permission_request", map[string]any{"request_id": "r1", "tool_use_id": "t1", "tool_name": "Bash",
		"input": map[string]any{"command": "rm -rf build"}, "timeout_ms": 300})

	got := f.waitSidecarCommand(t, id, protocol.CommandPermissionResponse, 1)
	var resp protocol.PermissionResponse
	require.NoError(t, json.Unmarshal(got[0], &resp))
	assert.Equal(t, "r1", resp.RequestID)
	assert.Equal(t, protocol.BehaviorDeny, resp.Behavior, "the policy denies what nobody decided")
	f.waitStatus(t, id, domain.StatusRunning)

	// Both workers saw the expired wait; give them more sweeps to act twice.
	time.Sleep(300 * time.Millisecond)
	f.waitEvents(t, id, "tool_permission_timed_out", 1)
	assert.Equal(t, 1, f.eventCount(t, id, "tool_permission_timed_out"), "the wait expired once")
	assert.Len(t, f.sidecarCommands(t, id, protocol.CommandPermissionResponse), 1)
}

func TestAPermissionPolicyThatFailsOnTimeoutFailsTheSession(t *testing.T) {
	f := startFlow(t, 0)
	f.timeouts(t, 1)
	id := f.startWith(t, &domain.ToolApprovalPolicy{Mode: domain.ApprovalAll, Timeout: 300 * time.Millisecond, OnTimeout: domain.TimeoutFail})
	f.waitStatus(t, id, domain.StatusRunning)
	f.raw(t, id, "permission_request", map[string]any{"request_id": "r1", "tool_use_id": "t1", "tool_name": "Bash",
		"input": map[string]any{"command": "make deploy"}, "timeout_ms": 300})

	f.waitStatus(t, id, domain.StatusFailed)
	got := f.waitSidecarCommand(t, id, protocol.CommandPermissionResponse, 1)
	var resp protocol.PermissionResponse
	require.NoError(t, json.Unmarshal(got[0], &resp))
	assert.Equal(t, protocol.PermissionResponse{RequestID: "r1", Behavior: protocol.BehaviorDeny,
		Message: "no decision within the permission timeout"}, resp, "the waiting tool is not left hanging")
	time.Sleep(200 * time.Millisecond)
	assert.Len(t, f.sidecarCommands(t, id, protocol.CommandPermissionResponse), 1)
}

func TestAWaitThatIsNotDueIsLeftAlone(t *testing.T) {
	f := startFlow(t, 0)
	f.timeouts(t, 1)
	id := f.startWith(t, &domain.ToolApprovalPolicy{Mode: domain.ApprovalAll, Timeout: time.Hour, OnTimeout: domain.TimeoutFail})
	f.waitStatus(t, id, domain.StatusRunning)
	f.raw(t, id, "permission_request", map[string]any{"request_id": "r1", "tool_use_id": "t1", "tool_name": "Bash",
		"input": map[string]any{"command": "make"}, "timeout_ms": 3600000})
	f.waitStatus(t, id, domain.StatusWaitingForApproval)

	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, domain.StatusWaitingForApproval, f.status(t, id))
	assert.Zero(t, f.eventCount(t, id, "tool_permission_timed_out"))
	assert.Empty(t, f.sidecarCommands(t, id, protocol.CommandPermissionResponse))
}

func TestAnUnansweredQuestionTakesTheDefaultAnswer(t *testing.T) {
	f := startFlow(t, 0)
	f.timeouts(t, 1)
	id := f.startTimed(t, domain.SessionTimeouts{Input: 300 * time.Millisecond, DefaultAnswer: "main", Pause: time.Hour})
	f.ask(t, id)

	got := f.waitSidecarCommand(t, id, protocol.CommandAnswerQuestion, 1)
	var answer protocol.AnswerQuestion
	require.NoError(t, json.Unmarshal(got[0], &answer))
	assert.Equal(t, "main", answer.Answer)
	f.waitStatus(t, id, domain.StatusRunning)
	f.waitEvents(t, id, "session_input_timed_out", 1)
	assert.Equal(t, 1, f.eventCount(t, id, "session_input_timed_out"))
}

func TestAnUnansweredQuestionWithoutDefaultFailsTheSession(t *testing.T) {
	f := startFlow(t, 0)
	f.timeouts(t, 1)
	id := f.startTimed(t, domain.SessionTimeouts{Input: 300 * time.Millisecond, Pause: time.Hour})
	f.ask(t, id)

	f.waitStatus(t, id, domain.StatusFailed)
	s, err := postgres.Sessions{}.Get(context.Background(), f.pool, id)
	require.NoError(t, err)
	require.NotNil(t, s.Failure())
	assert.Equal(t, domain.FailureTimeout, s.Failure().Reason)
	assert.Empty(t, f.sidecarCommands(t, id, protocol.CommandAnswerQuestion))
}

func TestAPauseHeldTooLongFailsTheSession(t *testing.T) {
	f := startFlow(t, 0)
	f.timeouts(t, 1)
	id := f.startTimed(t, domain.SessionTimeouts{Input: time.Hour, Pause: 300 * time.Millisecond})
	f.do(t, domain.AggregateSession, command.PauseSession, id, nil)
	f.ack(t, id, protocol.CommandPause, "pause_ack")

	f.waitStatus(t, id, domain.StatusFailed)
	f.waitEvents(t, id, "session_pause_timed_out", 1)
}

func TestBudgetExhaustionPausesTheSessionUntilTheBudgetIsRaised(t *testing.T) {
	f := startFlow(t, 0)
	id := f.start(t)
	f.waitStatus(t, id, domain.StatusRunning)

	f.spend(t, id, 10.25)
	f.ack(t, id, protocol.CommandPause, "pause_ack")
	f.waitStatus(t, id, domain.StatusPaused)
	assert.Equal(t, 1, f.eventCount(t, id, "session_budget_exhausted"))

	cmd, err := command.New(domain.AggregateSession, command.ResumeSession, id, f.owner.String(), nil)
	require.NoError(t, err)
	r, err := f.client.Do(context.Background(), cmd)
	require.NoError(t, err)
	e, ok := command.AsError(r.Err())
	require.True(t, ok, "a spent session does not resume")
	assert.Equal(t, command.KindConflict, e.Kind)
	assert.Empty(t, f.sidecarCommands(t, id, protocol.CommandResume))

	f.do(t, domain.AggregateSession, command.RaiseBudget, id, command.BudgetData{HardCapUsd: domain.Dollars(20)})
	f.do(t, domain.AggregateSession, command.ResumeSession, id, nil)
	f.ack(t, id, protocol.CommandResume, "resume_ack")
	f.waitStatus(t, id, domain.StatusRunning)

	f.spend(t, id, 1)
	time.Sleep(200 * time.Millisecond)
	assert.Len(t, f.sidecarCommands(t, id, protocol.CommandPause), 1, "spending under the raised cap does not pause")
}
