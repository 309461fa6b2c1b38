package commands_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/handlers/commands"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/postgres"
)

type sessionHarness struct {
	pool   *pgxpool.Pool
	client *command.Client
	owner  uuid.UUID
}

func startWorker(t *testing.T, maxSessions int) sessionHarness {
	t.Helper()
	pool := testenv.Postgres(t)
	_, js, nc := bustest.Server(t)
	sessionPool, err := domain.NewSessionPool(domain.SessionPoolConfig{MaxConcurrentSessions: maxSessions})
	require.NoError(t, err)
	d := commands.NewDispatcher(pool, nc, commands.Classify)
	commands.Register(d, nil, sessionPool)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = bus.Run(ctx, js, bus.RunnerConfig{Stream: bus.StreamCommands, Consumer: commands.Consumer, Handler: d.Handle, Concurrency: 4})
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	client, err := command.NewClient(nc, js, commands.Results{Pool: pool})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	return sessionHarness{pool: pool, client: client, owner: uuid.New()}
}

// send runs a command as the harness's owner (or as an internal command
// when owner is empty) and returns its result.
func (h sessionHarness) send(t *testing.T, aggregate, name string, id uuid.UUID, owner string, data any) command.Result {
	t.Helper()
	cmd, err := command.New(aggregate, name, id, owner, data)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := h.client.Do(ctx, cmd)
	require.NoError(t, err)
	return r
}

func (h sessionHarness) session(t *testing.T, name string, id uuid.UUID, data any) domain.AgentSessionSnapshot {
	t.Helper()
	r := h.send(t, domain.AggregateSession, name, id, h.owner.String(), data)
	require.NoError(t, r.Err(), name)
	var snap domain.AgentSessionSnapshot
	require.NoError(t, json.Unmarshal(r.State, &snap))
	return snap
}

func (h sessionHarness) internal(t *testing.T, name string, id uuid.UUID, data any) domain.AgentSessionSnapshot {
	t.Helper()
	r := h.send(t, domain.AggregateSession, name, id, "", data)
	require.NoError(t, r.Err(), name)
	var snap domain.AgentSessionSnapshot
	require.NoError(t, json.Unmarshal(r.State, &snap))
	return snap
}

// ackOf is the ack of the command of kind cmd the session awaits, as the
// ACL sends it.
func ackOf(t *testing.T, snap domain.AgentSessionSnapshot, cmd domain.SidecarCommand) command.AckData {
	t.Helper()
	for _, a := range snap.AwaitedAcks {
		if a.Command == cmd {
			return command.AckData{CommandID: a.CommandID}
		}
	}
	t.Fatalf("session %s awaits no %s ack", snap.ID, cmd)
	return command.AckData{}
}

func (h sessionHarness) refused(t *testing.T, name string, id uuid.UUID, data any) *command.Error {
	t.Helper()
	r := h.send(t, domain.AggregateSession, name, id, h.owner.String(), data)
	e, ok := command.AsError(r.Err())
	require.True(t, ok, "%s must be refused", name)
	return e
}

func startData() command.StartSessionData {
	return command.StartSessionData{WorkingDirectory: "/work/repo", Objective: "Fix the flaky test", BudgetCapUsd: domain.Dollars(5)}
}

// newSession starts a session and, if running, allocates it.
func (h sessionHarness) newSession(t *testing.T, running bool) uuid.UUID {
	t.Helper()
	id := uuid.New()
	r := h.send(t, domain.AggregateSession, command.StartSession, id, h.owner.String(), startData())
	require.NoError(t, r.Err())
	if running {
		var res command.AllocateResult
		r := h.send(t, domain.AggregateSession, command.AllocateSession, id, "", nil)
		require.NoError(t, r.Err())
		require.NoError(t, json.Unmarshal(r.State, &res))
		require.True(t, res.Allocated)
	}
	return id
}

func (h sessionHarness) outboxTypes(t *testing.T, id uuid.UUID) []string {
	rows, err := h.pool.Query(context.Background(), "SELECT type FROM outbox WHERE aggregate_id = $1 ORDER BY position", id)
	require.NoError(t, err)
	var types []string
	for rows.Next() {
		var typ string
		require.NoError(t, rows.Scan(&typ))
		types = append(types, typ)
	}
	return types
}

func TestStartSessionReturnsKeyOnceAndStoresItsHash(t *testing.T) {
	h := startWorker(t, 0)
	id := uuid.New()
	cmd, err := command.New(domain.AggregateSession, command.StartSession, id, h.owner.String(), startData())
	require.NoError(t, err)
	ctx := context.Background()
	first, err := h.client.Do(ctx, cmd)
	require.NoError(t, err)
	require.NoError(t, first.Err())
	var res command.StartSessionResult
	require.NoError(t, json.Unmarshal(first.State, &res))
	assert.True(t, strings.HasPrefix(res.APIKey, domain.APIKeyPrefix))
	assert.Equal(t, domain.StatusQueued, res.Session.Status)
	assert.EqualValues(t, 1, res.Session.Version, "the state is the stored one")
	assert.Empty(t, res.Session.APIKeyHash, "the hash stays in the database")

	var stored string
	require.NoError(t, h.pool.QueryRow(ctx, "SELECT api_key_hash FROM sessions WHERE id = $1", id).Scan(&stored))
	assert.Equal(t, domain.HashAPIKey(res.APIKey), stored)
	var results string
	require.NoError(t, h.pool.QueryRow(ctx, "SELECT result::text FROM processed_messages WHERE message_id = $1", cmd.ID.String()).Scan(&results))
	assert.NotContains(t, results, res.APIKey, "the plaintext key is never stored")

	again, err := h.client.Do(ctx, cmd)
	require.NoError(t, err)
	var repeat command.StartSessionResult
	require.NoError(t, json.Unmarshal(again.State, &repeat))
	assert.Empty(t, repeat.APIKey, "a repeat does not show the key again")
	assert.Equal(t, res.Session.ID, repeat.Session.ID)
	assert.Equal(t, []string{"agent_session_created"}, h.outboxTypes(t, id))
}

func TestStartSessionRejectsInvalidInput(t *testing.T) {
	h := startWorker(t, 0)
	cases := map[string]struct {
		change func(*command.StartSessionData)
		field  string
	}{
		"empty objective":   {func(d *command.StartSessionData) { d.Objective = "" }, "objective"},
		"relative dir":      {func(d *command.StartSessionData) { d.WorkingDirectory = "repo" }, "workingDirectory"},
		"no budget":         {func(d *command.StartSessionData) { d.BudgetCapUsd = 0 }, "budget"},
		"objective too big": {func(d *command.StartSessionData) { d.Objective = strings.Repeat("x", domain.MaxObjectiveChars+1) }, "objective"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			data := startData()
			c.change(&data)
			e := h.refused(t, command.StartSession, uuid.New(), data)
			assert.Equal(t, command.KindValidation, e.Kind)
			assert.Contains(t, e.Field, c.field)
		})
	}
}

func TestLifecycleCommandsThroughThePipeline(t *testing.T) {
	h := startWorker(t, 0)
	steps := []struct {
		name     string
		internal bool
		data     any
		want     domain.SessionStatus
	}{
		{command.PauseSession, false, nil, domain.StatusPausing},
		{command.ConfirmPaused, true, domain.SidecarPause, domain.StatusPaused},
		{command.ResumeSession, false, nil, domain.StatusResuming},
		{command.ConfirmResumed, true, domain.SidecarResume, domain.StatusRunning},
		{command.InterruptSession, false, nil, domain.StatusInterrupting},
		{command.ConfirmInterrupted, true, domain.SidecarInterrupt, domain.StatusInterrupted},
		{command.BeginTurn, true, nil, domain.StatusRunning},
		{command.RecordQuestionAsked, true, command.QuestionData{Content: "Which database?", Options: []string{"Postgres", "SQLite"}}, domain.StatusWaitingForInput},
		{command.AnswerQuestion, false, command.AnswerData{Answer: "Postgres"}, domain.StatusRunning},
		{command.RecordPlanPending, true, command.PlanData{Content: "1. read 2. fix", RequiresApproval: true}, domain.StatusWaitingForApproval},
		{command.RejectPlan, false, command.FeedbackData{Feedback: "add tests first"}, domain.StatusRunning},
		{command.RecordPlanPending, true, command.PlanData{Content: "1. test 2. fix", RequiresApproval: true}, domain.StatusWaitingForApproval},
		{command.ApprovePlan, false, nil, domain.StatusRunning},
		{command.RecordAgentOutput, true, command.OutputData{Output: domain.SessionOutput{FilesChanged: 2, AllTestsPassing: true}}, domain.StatusIdle},
		{command.ApproveOutput, false, nil, domain.StatusCompleted},
	}
	id := h.newSession(t, true)
	var snap domain.AgentSessionSnapshot
	for _, s := range steps {
		data := s.data
		if cmd, ok := data.(domain.SidecarCommand); ok {
			data = ackOf(t, snap, cmd)
		}
		if s.internal {
			snap = h.internal(t, s.name, id, data)
		} else {
			snap = h.session(t, s.name, id, data)
		}
		assert.Equal(t, s.want, snap.Status, "after %s", s.name)
	}
	types := h.outboxTypes(t, id)
	for _, want := range []string{"session_allocated", "agent_session_started", "session_pause_requested", "session_paused",
		"session_plan_rejected", "session_plan_approved", "agent_session_approved"} {
		assert.Contains(t, types, want)
	}
}

func TestForbiddenTransitionIsAConflictWithCurrentStatus(t *testing.T) {
	h := startWorker(t, 0)
	queued := h.newSession(t, false)
	cases := []struct {
		name string
		data any
	}{
		{command.PauseSession, nil},
		{command.InterruptSession, nil},
		{command.ResumeSession, nil},
		{command.ApproveOutput, nil},
		{command.AnswerQuestion, command.AnswerData{Answer: "yes"}},
		{command.ApprovePlan, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := h.refused(t, c.name, queued, c.data)
			assert.Equal(t, command.KindConflict, e.Kind)
			assert.Equal(t, string(domain.StatusQueued), e.CurrentStatus)
		})
	}
	var status string
	require.NoError(t, h.pool.QueryRow(context.Background(), "SELECT status FROM sessions WHERE id = $1", queued).Scan(&status))
	assert.Equal(t, string(domain.StatusQueued), status, "refused commands change nothing")
}

func TestCancelQueuedIsImmediateAndRunningIsTwoPhase(t *testing.T) {
	h := startWorker(t, 0)
	queued := h.newSession(t, false)
	assert.Equal(t, domain.StatusCancelled, h.session(t, command.CancelSession, queued, nil).Status)

	running := h.newSession(t, true)
	cancelling := h.session(t, command.CancelSession, running, nil)
	assert.Equal(t, domain.StatusCancelling, cancelling.Status)
	assert.Equal(t, domain.StatusCancelled, h.internal(t, command.ConfirmCancelled, running, ackOf(t, cancelling, domain.SidecarStop)).Status)
	released := h.internal(t, command.ReleaseSession, running, nil)
	assert.Equal(t, domain.StatusCancelled, released.Status)
	assert.Contains(t, h.outboxTypes(t, running), "session_released")
}

func TestAnotherOwnersSessionIsNotFound(t *testing.T) {
	h := startWorker(t, 0)
	id := h.newSession(t, true)
	r := h.send(t, domain.AggregateSession, command.PauseSession, id, uuid.NewString(), nil)
	e, ok := command.AsError(r.Err())
	require.True(t, ok)
	assert.Equal(t, command.KindNotFound, e.Kind)

	r = h.send(t, domain.AggregateSession, command.PauseSession, uuid.New(), h.owner.String(), nil)
	e, ok = command.AsError(r.Err())
	require.True(t, ok)
	assert.Equal(t, command.KindNotFound, e.Kind)
}

func TestFullPoolLeavesSessionQueuedAndSaysSo(t *testing.T) {
	h := startWorker(t, 1)
	h.newSession(t, true)
	second := h.newSession(t, false)
	r := h.send(t, domain.AggregateSession, command.AllocateSession, second, "", nil)
	require.NoError(t, r.Err())
	var res command.AllocateResult
	require.NoError(t, json.Unmarshal(r.State, &res))
	assert.False(t, res.Allocated)
	assert.Equal(t, domain.StatusQueued, res.Session.Status)
	assert.Contains(t, h.outboxTypes(t, second), "session_pool_exhausted")
}

func TestConcurrentAllocationsNeverOverfillThePool(t *testing.T) {
	h := startWorker(t, 3)
	ids := make([]uuid.UUID, 10)
	for i := range ids {
		ids[i] = h.newSession(t, false)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	allocated := 0
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := h.send(t, domain.AggregateSession, command.AllocateSession, id, "", nil)
			var res command.AllocateResult
			if r.Err() == nil && json.Unmarshal(r.State, &res) == nil && res.Allocated {
				mu.Lock()
				allocated++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 3, allocated)
	n, err := postgres.Pools{}.Active(context.Background(), h.pool, h.owner)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
}

func TestConcurrentReleasesFillEveryFreedSlot(t *testing.T) {
	h := startWorker(t, 4)
	running := make([]uuid.UUID, 4)
	for i := range running {
		running[i] = h.newSession(t, true)
	}
	queued := make([]uuid.UUID, 10)
	for i := range queued {
		queued[i] = h.newSession(t, false)
	}
	for _, id := range running {
		h.internal(t, command.RecordFailure, id, command.FailureData{Reason: domain.FailureAgentError, Message: "crashed"})
	}
	var wg sync.WaitGroup
	for _, id := range running {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := h.send(t, domain.AggregateSession, command.ReleaseSession, id, "", nil)
			assert.NoError(t, r.Err())
		}()
	}
	wg.Wait()

	n, err := postgres.Pools{}.Active(context.Background(), h.pool, h.owner)
	require.NoError(t, err)
	assert.Equal(t, 4, n, "every freed slot is taken")
	for i, id := range queued {
		stored, err := postgres.Sessions{}.Get(context.Background(), h.pool, id)
		require.NoError(t, err)
		if i < 4 {
			assert.Equal(t, domain.StatusRunning, stored.Status(), "the oldest Queued sessions start first")
		} else {
			assert.Equal(t, domain.StatusQueued, stored.Status())
		}
	}
}

func TestBudgetExhaustionRequestsPauseAndRaiseAllowsResume(t *testing.T) {
	h := startWorker(t, 0)
	id := h.newSession(t, true)
	snap := h.internal(t, command.UpdateMetrics, id, command.MetricsData{ModelID: "claude-sonnet", CostUsd: domain.Dollars(5),
		Tokens:        domain.TokenUsage{InputTokens: 1000, OutputTokens: 200},
		ContextWindow: domain.ContextWindowSnapshot{InputTokens: 1000, ModelContextLimit: 200000, RecordedAt: time.Now()}})
	assert.Equal(t, domain.StatusPausing, snap.Status)
	assert.Equal(t, domain.StatusPaused, h.internal(t, command.ConfirmPaused, id, ackOf(t, snap, domain.SidecarPause)).Status)
	e := h.refused(t, command.ResumeSession, id, nil)
	assert.Equal(t, command.KindConflict, e.Kind)
	h.session(t, command.RaiseBudget, id, command.BudgetData{HardCapUsd: domain.Dollars(10)})
	assert.Equal(t, domain.StatusResuming, h.session(t, command.ResumeSession, id, nil).Status)
	types := h.outboxTypes(t, id)
	assert.Contains(t, types, "session_budget_warning")
	assert.Contains(t, types, "session_budget_exhausted")
	assert.Contains(t, types, "session_budget_raised")
}

func TestMessageQueueCommands(t *testing.T) {
	h := startWorker(t, 0)
	id := h.newSession(t, true)
	enqueue := func(content string, p domain.MessagePriority) command.Result {
		return h.send(t, domain.AggregateQueue, command.EnqueueMessage, id, h.owner.String(),
			command.EnqueueData{MessageID: uuid.New(), Content: content, Priority: p})
	}
	queueState := func(r command.Result) command.QueueState {
		require.NoError(t, r.Err())
		var q command.QueueState
		require.NoError(t, json.Unmarshal(r.State, &q))
		return q
	}
	queueState(enqueue("after the turn", domain.PriorityQueued))
	q := queueState(enqueue("stop and look at main.go", domain.PriorityImmediate))
	require.Len(t, q.Pending, 2)
	assert.Equal(t, domain.PriorityImmediate, q.Pending[0].Priority, "Immediate before Queued")
	queuedID := q.Pending[1].MessageID

	immediateID := q.Pending[0].MessageID
	q = queueState(h.send(t, domain.AggregateQueue, command.PromoteMessage, id, h.owner.String(), command.MessageData{MessageID: queuedID}))
	for _, m := range q.Pending {
		assert.Equal(t, domain.PriorityImmediate, m.Priority)
	}
	q = queueState(h.send(t, domain.AggregateQueue, command.MarkDelivered, id, "", command.MessageData{MessageID: immediateID}))
	require.Len(t, q.Pending, 1)
	q = queueState(h.send(t, domain.AggregateQueue, command.CancelMessage, id, h.owner.String(), command.MessageData{MessageID: queuedID}))
	assert.Empty(t, q.Pending)

	e, ok := command.AsError(h.send(t, domain.AggregateQueue, command.CancelMessage, id, h.owner.String(), command.MessageData{MessageID: queuedID}).Err())
	require.True(t, ok)
	assert.Equal(t, command.KindConflict, e.Kind, "only pending messages can be cancelled")

	e, ok = command.AsError(enqueue(strings.Repeat("x", domain.MaxMessageChars+1), domain.PriorityQueued).Err())
	require.True(t, ok)
	assert.Equal(t, command.KindValidation, e.Kind)

	e, ok = command.AsError(h.send(t, domain.AggregateQueue, command.PromoteMessage, id, h.owner.String(), command.MessageData{MessageID: uuid.New()}).Err())
	require.True(t, ok)
	assert.Equal(t, command.KindNotFound, e.Kind)

	cancelling := h.session(t, command.CancelSession, id, nil)
	h.internal(t, command.ConfirmCancelled, id, ackOf(t, cancelling, domain.SidecarStop))
	e, ok = command.AsError(enqueue("too late", domain.PriorityQueued).Err())
	require.True(t, ok)
	assert.Equal(t, command.KindConflict, e.Kind, "a terminal session takes no messages")
	assert.Contains(t, h.outboxTypes(t, id), "message_enqueued")
}
