package acl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/handlers/acl"
	"github.com/agentbus/agentbus/handlers/commands"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/relay"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type stack struct {
	pool   *pgxpool.Pool
	js     jetstream.JetStream
	client *command.Client
	owner  uuid.UUID
	seq    int
}

// start runs the commands worker and the ACL worker on real Postgres and
// JetStream; raw events are published as the relay publishes them.
func start(t *testing.T) *stack {
	t.Helper()
	pool := testenv.Postgres(t)
	_, js, nc := bustest.Server(t)
	sessionPool, err := domain.NewSessionPool(domain.SessionPoolConfig{})
	require.NoError(t, err)
	d := commands.NewDispatcher(pool, nc, commands.Classify)
	commands.Register(d, nil, sessionPool)
	client, err := command.NewClient(nc, js, commands.Results{Pool: pool})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_ = bus.Run(ctx, js, bus.RunnerConfig{Stream: bus.StreamCommands, Consumer: commands.Consumer, Handler: d.Handle, Concurrency: 4})
	}()
	go func() { defer wg.Done(); _ = acl.New(pool, client).Run(ctx, js) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return &stack{pool: pool, js: js, client: client, owner: uuid.New()}
}

func (s *stack) do(t *testing.T, name string, id uuid.UUID, owner string, data any) command.Result {
	t.Helper()
	cmd, err := command.New(domain.AggregateSession, name, id, owner, data)
	require.NoError(t, err)
	r, err := s.client.Do(context.Background(), cmd)
	require.NoError(t, err)
	require.NoError(t, r.Err(), name)
	return r
}

func (s *stack) runningSession(t *testing.T) uuid.UUID {
	id := uuid.New()
	s.do(t, command.StartSession, id, s.owner.String(), command.StartSessionData{
		WorkingDirectory: "/work/repo", Objective: "Tidy the logs", BudgetCapUsd: domain.Dollars(10)})
	s.do(t, command.AllocateSession, id, "", nil)
	return id
}

// raw publishes a raw event of session id as the relay does.
func (s *stack) raw(t *testing.T, id uuid.UUID, typ string, data any) {
	t.Helper()
	s.seq++
	body := relay.Event{SessionID: id.String(), EntryID: fmt.Sprintf("%d-0", s.seq), Type: typ, TS: time.Now().UnixMilli()}
	if data != nil {
		raw, err := json.Marshal(data)
		require.NoError(t, err)
		body.Data = raw
	}
	s.publish(t, id, typ, body)
}

func (s *stack) publish(t *testing.T, id uuid.UUID, typ string, body relay.Event) {
	payload, err := json.Marshal(body)
	require.NoError(t, err)
	msg := &nats.Msg{Subject: bus.SidecarEventSubject(id.String(), typ), Data: payload, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, id.String()+":"+body.EntryID)
	_, err = s.js.PublishMsg(context.Background(), msg)
	require.NoError(t, err)
}

func (s *stack) session(t *testing.T, id uuid.UUID) *domain.AgentSession {
	sess, err := postgres.Sessions{}.Get(context.Background(), s.pool, id)
	require.NoError(t, err)
	return sess
}

func (s *stack) eventually(t *testing.T, id uuid.UUID, cond func(*domain.AgentSession) bool, msg string) {
	t.Helper()
	require.Eventually(t, func() bool { return cond(s.session(t, id)) }, 30*time.Second, 20*time.Millisecond, msg)
}

func (s *stack) activity(t *testing.T, id uuid.UUID) []string {
	rows, err := s.pool.Query(context.Background(), "SELECT type || ':' || raw_type FROM activity_items WHERE session_id = $1 ORDER BY source_seq", id)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var v string
		require.NoError(t, rows.Scan(&v))
		out = append(out, v)
	}
	return out
}

func TestAcksConfirmTwoPhaseTransitions(t *testing.T) {
	s := start(t)
	id := s.runningSession(t)
	s.do(t, command.PauseSession, id, s.owner.String(), nil)
	s.raw(t, id, "pause_ack", map[string]any{"command_id": uuid.NewString()})
	s.eventually(t, id, func(x *domain.AgentSession) bool { return x.Status() == domain.StatusPaused }, "pause_ack -> Paused")

	s.do(t, command.ResumeSession, id, s.owner.String(), nil)
	s.raw(t, id, "resume_ack", map[string]any{"command_id": uuid.NewString()})
	s.eventually(t, id, func(x *domain.AgentSession) bool { return x.Status() == domain.StatusRunning }, "resume_ack -> Running")

	s.do(t, command.CancelSession, id, s.owner.String(), nil)
	s.raw(t, id, "stop_ack", map[string]any{"command_id": uuid.NewString(), "forced": false})
	s.eventually(t, id, func(x *domain.AgentSession) bool { return x.Status() == domain.StatusCancelled }, "stop_ack -> Cancelled")
	assert.Equal(t, []string{"StatusChange:pause_ack", "StatusChange:resume_ack", "StatusChange:stop_ack"}, s.activity(t, id))
}

func TestToolUseDrivesQuestionTasksAndPlan(t *testing.T) {
	s := start(t)
	id := s.runningSession(t)
	s.raw(t, id, "assistant_message", map[string]any{"message_id": "m1", "block_type": "tool_use", "tool_use_id": "t1",
		"tool_name": "TodoWrite", "input": map[string]any{"todos": []map[string]any{
			{"content": "Read the logs", "status": "completed"}, {"content": "Fix the rotation", "status": "in_progress"}}}})
	s.raw(t, id, "assistant_message", map[string]any{"message_id": "m2", "block_type": "tool_use", "tool_use_id": "t2",
		"tool_name": "TodoWrite", "input": map[string]any{"todos": []map[string]any{{"content": "Only this", "status": "pending"}}}})
	s.eventually(t, id, func(x *domain.AgentSession) bool {
		tl := x.TaskList()
		return tl != nil && len(tl.Tasks) == 1 && tl.Tasks[0].Subject == "Only this"
	}, "TodoWrite replaces the task list, never accumulates")

	s.raw(t, id, "assistant_message", map[string]any{"message_id": "m3", "block_type": "tool_use", "tool_use_id": "t3",
		"tool_name": "AskUserQuestion", "input": map[string]any{"questions": []map[string]any{
			{"question": "Keep old logs?", "options": []map[string]any{{"label": "Yes"}, {"label": "No"}}}}}})
	s.eventually(t, id, func(x *domain.AgentSession) bool { return x.Status() == domain.StatusWaitingForInput }, "AskUserQuestion -> WaitingForInput")
	q := s.session(t, id).PendingQuestion()
	require.NotNil(t, q)
	assert.Equal(t, "Keep old logs?", q.Content)
	assert.Equal(t, []string{"Yes", "No"}, q.Options)

	s.do(t, command.AnswerQuestion, id, s.owner.String(), command.AnswerData{Answer: "No"})
	s.raw(t, id, "assistant_message", map[string]any{"message_id": "m4", "block_type": "tool_use", "tool_use_id": "t4",
		"tool_name": "ExitPlanMode", "input": map[string]any{"plan": "1. rotate daily\n2. keep 7"}})
	s.eventually(t, id, func(x *domain.AgentSession) bool { return x.Status() == domain.StatusWaitingForApproval }, "ExitPlanMode -> WaitingForApproval")
	assert.Equal(t, "1. rotate daily\n2. keep 7", s.session(t, id).Plan().Content)
}

func TestUsageUpdatesSumCostAndReplaceTheContextWindow(t *testing.T) {
	s := start(t)
	id := s.runningSession(t)
	for _, used := range []int64{50000, 80000} {
		s.raw(t, id, "usage_update", map[string]any{"model": "claude-sonnet-4-5", "cost_usd": 0.25, "input_tokens": 1000,
			"output_tokens": 100, "context_window_used_tokens": used, "context_window_max_tokens": 200000, "is_subagent": false})
	}
	s.eventually(t, id, func(x *domain.AgentSession) bool { return x.Metrics().TotalCostUsd == domain.Dollars(1)/2 },
		"cost is summed over reports")
	m := s.session(t, id).Metrics()
	assert.EqualValues(t, 80000, m.ContextWindow.InputTokens, "the snapshot is replaced, not summed")
}

func TestSessionEndMapsToOutputOrFailure(t *testing.T) {
	s := start(t)
	ok := s.runningSession(t)
	s.raw(t, ok, "turn_completed", map[string]any{"cost_usd": 0.01, "total_cost_usd": 0.01, "duration_ms": 900, "num_turns": 1, "final": false})
	s.eventually(t, ok, func(x *domain.AgentSession) bool { return x.Status() == domain.StatusIdle }, "a turn ends")
	s.raw(t, ok, "assistant_message", map[string]any{"message_id": "m9", "block_type": "text", "text": "One more thing."})
	s.raw(t, ok, "turn_completed", map[string]any{"cost_usd": 0.01, "total_cost_usd": 0.02, "duration_ms": 500, "num_turns": 2, "final": true})
	s.raw(t, ok, "session_end", map[string]any{"status": "success", "reason": "completed", "exit_code": 0})
	s.eventually(t, ok, func(x *domain.AgentSession) bool { return x.Status() == domain.StatusIdle && x.HasPendingReview() }, "clean end -> Idle with review")

	failed := s.runningSession(t)
	s.raw(t, failed, "session_end", map[string]any{"status": "error", "reason": "crashed", "failure_reason": "InfrastructureError", "exit_code": -1, "error": "sidecar killed"})
	s.eventually(t, failed, func(x *domain.AgentSession) bool { return x.Status() == domain.StatusFailed }, "error end -> Failed")
	f := s.session(t, failed).Failure()
	require.NotNil(t, f)
	assert.Equal(t, domain.FailureInfrastructureError, f.Reason)
}

func TestMalformedRawEventIsRecordedAndDeadLetteredAndTheSessionGoesOn(t *testing.T) {
	s := start(t)
	id := s.runningSession(t)
	s.seq++
	s.publish(t, id, relay.TypeInvalid, relay.Event{SessionID: id.String(), EntryID: "900-0", Type: relay.TypeInvalid,
		Error: "data is not JSON", Fields: map[string]string{"type": "assistant_message", "data": "{oops"}})
	s.raw(t, id, "assistant_message", map[string]any{"message_id": "m1", "block_type": "tool_use", "tool_use_id": "t1",
		"tool_name": "AskUserQuestion", "input": "not an object"})
	s.do(t, command.PauseSession, id, s.owner.String(), nil)
	s.raw(t, id, "pause_ack", map[string]any{"command_id": uuid.NewString()})
	s.eventually(t, id, func(x *domain.AgentSession) bool { return x.Status() == domain.StatusPaused }, "the session goes on")

	require.Eventually(t, func() bool {
		stream, err := s.js.Stream(context.Background(), bus.StreamDLQ)
		if err != nil {
			return false
		}
		info, err := stream.Info(context.Background(), jetstream.WithSubjectFilter(bus.DLQSubject(acl.Consumer)))
		return err == nil && info.State.Msgs == 2
	}, 30*time.Second, 50*time.Millisecond, "both unreadable events are dead-lettered")
	assert.Equal(t, []string{"UnknownEvent:invalid", "UnknownEvent:assistant_message", "StatusChange:pause_ack"}, s.activity(t, id))
}

func TestToolResultTakesItsCallsToolName(t *testing.T) {
	s := start(t)
	id := s.runningSession(t)
	s.raw(t, id, "assistant_message", map[string]any{"message_id": "m1", "block_type": "tool_use", "tool_use_id": "toolu_9",
		"tool_name": "Bash", "input": map[string]any{"command": "go test ./..."}})
	s.raw(t, id, "tool_result", map[string]any{"tool_use_id": "toolu_9", "content": "ok  agentbus 1.2s", "is_error": false})
	s.raw(t, id, "tool_result", map[string]any{"tool_use_id": "toolu_unknown", "content": "orphan", "is_error": false})
	require.Eventually(t, func() bool { return len(s.activity(t, id)) == 3 }, 30*time.Second, 20*time.Millisecond)
	var tool string
	require.NoError(t, s.pool.QueryRow(context.Background(),
		"SELECT tool_name FROM activity_items WHERE session_id = $1 AND type = 'ToolCallEnd'", id).Scan(&tool))
	assert.Equal(t, "Bash", tool)
	assert.Equal(t, "UnknownEvent:tool_result", s.activity(t, id)[2], "a result without its call is still recorded")
}

func TestRawEventWithInvalidTextIsRecordedInOrderAndDeadLettered(t *testing.T) {
	s := start(t)
	id := s.runningSession(t)
	s.raw(t, id, "assistant_message", map[string]any{"message_id": "m1", "block_type": "text", "text": "before\u0000after"})
	s.raw(t, id, "assistant_message", map[string]any{"message_id": "m2", "block_type": "text", "text": "Fine."})
	s.seq++
	s.publish(t, id, "tool_result", relay.Event{SessionID: id.String(), EntryID: fmt.Sprintf("%d-0", s.seq), Type: "tool_result",
		TS: time.Now().UnixMilli(), Data: json.RawMessage("{\"tool_use_id\":\"t1\",\"content\":\"caf\xe9\",\"is_error\":false}")})
	s.seq++
	s.publish(t, id, relay.TypeInvalid, relay.Event{SessionID: id.String(), EntryID: fmt.Sprintf("%d-0", s.seq), Type: relay.TypeInvalid,
		Error: "unknown type", Fields: map[string]string{"type": "odd\x00type", "data": "{}"}})
	s.do(t, command.PauseSession, id, s.owner.String(), nil)
	s.raw(t, id, "pause_ack", map[string]any{"command_id": uuid.NewString()})
	s.eventually(t, id, func(x *domain.AgentSession) bool { return x.Status() == domain.StatusPaused }, "the session goes on")

	want := []string{"UnknownEvent:assistant_message", "Message:assistant_message", "UnknownEvent:tool_result",
		"UnknownEvent:invalid", "StatusChange:pause_ack"}
	require.Eventually(t, func() bool { return len(s.activity(t, id)) == len(want) }, 30*time.Second, 20*time.Millisecond,
		"every event is recorded, the invalid ones too")
	assert.Equal(t, want, s.activity(t, id), "in the order they were written")

	rows, err := s.pool.Query(context.Background(), "SELECT summary FROM activity_items WHERE session_id = $1 AND type = 'UnknownEvent' ORDER BY source_seq", id)
	require.NoError(t, err)
	var summaries []string
	for rows.Next() {
		var v string
		require.NoError(t, rows.Scan(&v))
		summaries = append(summaries, v)
	}
	require.Len(t, summaries, 3)
	assert.Contains(t, summaries[0], "data.text")
	assert.Contains(t, summaries[1], "data.content")
	assert.Contains(t, summaries[2], "fields.type")
	require.Eventually(t, func() bool {
		stream, err := s.js.Stream(context.Background(), bus.StreamDLQ)
		if err != nil {
			return false
		}
		info, err := stream.Info(context.Background(), jetstream.WithSubjectFilter(bus.DLQSubject(acl.Consumer)))
		return err == nil && info.State.Msgs == 3
	}, 30*time.Second, 50*time.Millisecond, "the invalid events are dead-lettered")
}
