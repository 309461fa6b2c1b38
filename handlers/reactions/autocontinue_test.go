package reactions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/handlers/reactions"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/postgres/queries"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// startAutoContinued starts a running session in dir that validates its
// work after each turn.
func (f *flow) startAutoContinued(t *testing.T, dir string, cfg domain.AutoContinueConfig) uuid.UUID {
	t.Helper()
	id := uuid.New()
	f.do(t, domain.AggregateSession, command.StartSession, id, command.StartSessionData{
		WorkingDirectory: dir, Objective: "Make the build pass", BudgetCapUsd: domain.Dollars(10), AutoContinue: &cfg})
	f.waitStatus(t, id, domain.StatusRunning)
	return id
}

func (f *flow) endTurn(t *testing.T, id uuid.UUID, n int) {
	t.Helper()
	f.raw(t, id, "turn_completed", protocol.TurnCompleted{CostUSD: 0.1, TotalCostUSD: 0.1 * float64(n), DurationMS: 1000, NumTurns: n})
	f.waitStatus(t, id, domain.StatusIdle)
}

func (f *flow) steering(t *testing.T, id uuid.UUID, n int) protocol.SteeringMessage {
	t.Helper()
	got := f.waitSidecarCommand(t, id, protocol.CommandSteeringMessage, n)
	var m protocol.SteeringMessage
	require.NoError(t, json.Unmarshal(got[n-1], &m))
	return m
}

// lastEventMsg reads the session's last event of one type from the
// stream, as a consumer would receive it.
func (f *flow) lastEventMsg(t *testing.T, id uuid.UUID, typ string) jetstream.Msg {
	t.Helper()
	cons, err := f.js.OrderedConsumer(context.Background(), bus.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{bus.EventSubject(domain.AggregateSession, id.String(), typ)},
		DeliverPolicy:  jetstream.DeliverLastPolicy})
	require.NoError(t, err)
	m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
	require.NoError(t, err)
	return m
}

func (f *flow) continuations(t *testing.T, id uuid.UUID) int {
	t.Helper()
	s, err := postgres.Sessions{}.Get(context.Background(), f.pool, id)
	require.NoError(t, err)
	return s.AutoContinue().CurrentContinuationCount
}

// validation waits for the nth run_validation sent to the session's
// sidecar and returns its checks.
func (f *flow) validation(t *testing.T, id uuid.UUID, n int) []protocol.ValidationCheck {
	t.Helper()
	got := f.waitSidecarCommand(t, id, protocol.CommandRunValidation, n)
	var v protocol.RunValidation
	require.NoError(t, json.Unmarshal(got[n-1], &v))
	return v.Checks
}

// validated plays the sidecar answering a run_validation.
func (f *flow) validated(t *testing.T, id uuid.UUID, commandID string, checks ...protocol.CheckResult) {
	t.Helper()
	f.raw(t, id, protocol.EventValidationResult, protocol.ValidationResult{CommandID: commandID, Checks: checks})
}

func TestFailingValidationContinuesUntilMaxContinuationsThenNotifies(t *testing.T) {
	f := startFlow(t, 0)
	auto := reactions.AutoContinue{JS: f.js, DB: f.pool, Client: f.client}
	f.also(t, auto.Run)
	failing := `echo "--- FAIL: TestBuild"; exit 1`
	id := f.startAutoContinued(t, t.TempDir(), domain.AutoContinueConfig{IsEnabled: true, MaxContinuations: 2,
		ValidationCriteria: []domain.ValidationCriterion{{Type: domain.ValidationCustomCommand, CustomCommand: failing}}})
	fail := func(n int) {
		checks := f.validation(t, id, n)
		require.Len(t, checks, 1)
		assert.Equal(t, protocol.ValidationCheck{Name: "CustomCommand", Command: failing}, checks[0], "the sidecar runs the owner's command")
		f.validated(t, id, fmt.Sprint("validation-", n),
			protocol.CheckResult{Name: "CustomCommand", Command: failing, ExitCode: 1, Output: "--- FAIL: TestBuild\n"})
	}

	for n := 1; n <= 2; n++ {
		f.endTurn(t, id, n)
		fail(n)
		m := f.steering(t, id, n)
		assert.Contains(t, m.Content, "Validation failed: CustomCommand")
		assert.Contains(t, m.Content, "--- FAIL: TestBuild", "the agent sees what failed")
		assert.Contains(t, m.Content, "Continue working.")
		assert.Equal(t, n, f.continuations(t, id))
		// Earlier continuations were delivered and left the queue for
		// the session's message history: the queue view shows both.
		q, err := queries.New(f.pool, domain.SessionPool{}).Queue(context.Background(), f.owner, id)
		require.NoError(t, err)
		require.Len(t, q.Messages, n)
		assert.Equal(t, domain.MessageFromSystem, q.Messages[n-1].Source)
		if n == 1 {
			// A redelivered turn end asks for the same validation, and a
			// redelivered result repeats the same continuation.
			require.NoError(t, auto.Handle(context.Background(), f.lastEventMsg(t, id, "agent_session_turn_completed")))
			f.validated(t, id, "validation-1",
				protocol.CheckResult{Name: "CustomCommand", Command: failing, ExitCode: 1, Output: "--- FAIL: TestBuild\n"})
			resultsSettled(t, f.js)
			assert.Equal(t, 1, f.continuations(t, id))
			q, err := queries.New(f.pool, domain.SessionPool{}).Queue(context.Background(), f.owner, id)
			require.NoError(t, err)
			assert.Len(t, q.Messages, 1)
		}

		f.raw(t, id, "message_delivered", map[string]any{"message_id": m.MessageID, "priority": m.Priority})
		f.waitStatus(t, id, domain.StatusRunning)
	}

	f.endTurn(t, id, 3)
	fail(3)
	_, note := waitNotification(t, f.js, f.owner, reactions.NotifyAutoContinueStopped)
	assert.Equal(t, id.String(), note.SessionID)
	assert.Contains(t, note.Message, "after 2 automatic continuations")
	assert.Contains(t, note.Message, "--- FAIL: TestBuild")
	resultsSettled(t, f.js)
	assert.Len(t, f.sidecarCommands(t, id, protocol.CommandSteeringMessage), 2, "the loop stops at MaxContinuations")
	assert.Equal(t, 2, f.continuations(t, id))
	assert.Equal(t, domain.StatusIdle, f.status(t, id), "the session waits for its owner")
	assert.Equal(t, 1, notificationCount(t, f.js, f.owner, reactions.NotifyAutoContinueStopped))
}

func TestSpentAutoContinueLeavesTheSessionIdleWithoutPendingReview(t *testing.T) {
	f := startFlow(t, 0)
	auto := reactions.AutoContinue{JS: f.js, DB: f.pool, Client: f.client}
	f.also(t, auto.Run)
	id := f.startAutoContinued(t, t.TempDir(), domain.AutoContinueConfig{IsEnabled: true, MaxContinuations: 1,
		ValidationCriteria: []domain.ValidationCriterion{{Type: domain.ValidationCustomCommand, CustomCommand: "exit 1"}}})
	fail := func(n int) {
		f.validation(t, id, n)
		f.validated(t, id, fmt.Sprint("validation-", n), protocol.CheckResult{Name: "CustomCommand", Command: "exit 1", ExitCode: 1})
	}
	f.endTurn(t, id, 1)
	fail(1)
	m := f.steering(t, id, 1)
	f.raw(t, id, "message_delivered", map[string]any{"message_id": m.MessageID, "priority": m.Priority})
	f.waitStatus(t, id, domain.StatusRunning)

	// The last turn delivers output for review; validation still fails.
	f.raw(t, id, "session_end", map[string]any{"status": "success", "reason": "completed", "exit_code": 0})
	fail(2)
	waitNotification(t, f.js, f.owner, reactions.NotifyAutoContinueStopped)
	s := f.session(t, id)
	assert.Equal(t, domain.StatusIdle, s.Status())
	assert.False(t, s.HasPendingReview(), "the owner reviews by hand (seed 001 §8.10)")
	f.waitEvents(t, id, "session_auto_continue_exhausted", 1)
}

func TestPassingOrDisabledValidationEnqueuesNothing(t *testing.T) {
	f := startFlow(t, 0)
	f.also(t, reactions.AutoContinue{JS: f.js, DB: f.pool, Client: f.client}.Run)
	dir := t.TempDir()
	passing := f.startAutoContinued(t, dir, domain.AutoContinueConfig{IsEnabled: true, MaxContinuations: 3,
		ValidationCriteria: []domain.ValidationCriterion{
			{Type: domain.ValidationCustomCommand, CustomCommand: "test -f built"},
			{Type: domain.ValidationTestsPassing},
		}})
	disabled := f.startAutoContinued(t, dir, domain.AutoContinueConfig{IsEnabled: false, MaxContinuations: 3,
		ValidationCriteria: []domain.ValidationCriterion{{Type: domain.ValidationCustomCommand, CustomCommand: "false"}}})

	f.endTurn(t, passing, 1)
	f.endTurn(t, disabled, 1)
	checks := f.validation(t, passing, 1)
	assert.Equal(t, []protocol.ValidationCheck{{Name: "CustomCommand", Command: "test -f built"}, {Name: "TestsPassing", Command: "make test"}}, checks)
	f.validated(t, passing, "v1", protocol.CheckResult{Name: "CustomCommand", Command: "test -f built"},
		protocol.CheckResult{Name: "TestsPassing", Command: "make test", Output: "ok"})
	f.waitEvents(t, disabled, "agent_session_turn_completed", 1)
	settled(t, f.js, reactions.AutoContinueConsumer)
	resultsSettled(t, f.js)
	assert.Empty(t, f.sidecarCommands(t, disabled, protocol.CommandRunValidation), "nothing to validate")
	for _, id := range []uuid.UUID{passing, disabled} {
		assert.Empty(t, f.sidecarCommands(t, id, protocol.CommandSteeringMessage))
		assert.Zero(t, f.continuations(t, id))
		assert.Equal(t, domain.StatusIdle, f.status(t, id))
	}
	assert.Zero(t, notificationCount(t, f.js, f.owner, reactions.NotifyAutoContinueStopped))
}

func TestCoverageBelowThresholdAndSlowChecksFailTheValidation(t *testing.T) {
	f := startFlow(t, 0)
	f.also(t, reactions.AutoContinue{JS: f.js, DB: f.pool, Client: f.client, Timeout: 500 * time.Millisecond,
		Commands: map[domain.ValidationType]string{domain.ValidationCoverageThreshold: "go test -cover ./..."}}.Run)
	threshold := 80.0
	id := f.startAutoContinued(t, t.TempDir(), domain.AutoContinueConfig{IsEnabled: true, MaxContinuations: 1,
		ValidationCriteria: []domain.ValidationCriterion{
			{Type: domain.ValidationCoverageThreshold, Threshold: &threshold},
			{Type: domain.ValidationTestsPassing},
		}})

	// The last turn ends with the output: it is validated too.
	f.raw(t, id, "session_end", map[string]any{"status": "success", "reason": "completed", "exit_code": 0})
	checks := f.validation(t, id, 1)
	require.Len(t, checks, 2)
	assert.Equal(t, "go test -cover ./...", checks[0].Command)
	f.validated(t, id, "v1",
		protocol.CheckResult{Name: "CoverageThreshold", Command: checks[0].Command, Output: "ok  pkg/a  coverage: 91.0% of statements\ntotal: (statements) 42.5%"},
		protocol.CheckResult{Name: "TestsPassing", Command: "make test", ExitCode: -1, TimedOut: true, Output: "running"})
	m := f.steering(t, id, 1)
	assert.Contains(t, m.Content, "coverage is 42.5%, below the required 80%")
	assert.Contains(t, m.Content, "TestsPassing: `make test` did not finish in time")
	assert.Equal(t, 1, f.continuations(t, id))
}

// resultsSettled waits until the results consumer handled every result.
func resultsSettled(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	require.Eventually(t, bustest.CaughtUp(js, bus.StreamSidecarEvents, reactions.AutoContinueResultsConsumer),
		30*time.Second, 50*time.Millisecond, "the validation results were never all handled")
}
