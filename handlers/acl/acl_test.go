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
	worker *acl.Worker
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
	worker := acl.New(pool, client)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_ = bus.Run(ctx, js, bus.RunnerConfig{Stream: bus.StreamCommands, Consumer: commands.Consumer, Handler: d.Handle, Concurrency: 4})
	}()
	go func() { defer wg.Done(); _ = worker.Run(ctx, js) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return &stack{pool: pool, js: js, client: client, worker: worker, owner: uuid.New()}
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

// awaited returns the id of the sidecar command of kind cmd that session
// id awaits an ack for, as the sidecar would echo it.
func (s *stack) awaited(t *testing.T, id uuid.UUID, cmd domain.SidecarCommand) string {
	t.Helper()
	for _, a := range s.session(t, id).AwaitedAcks() {
		if a.Command == cmd {
			return a.CommandID.String()
		}
	}
	t.Fatalf("session %s awaits no %s ack", id, cmd)
	return ""
}

// strayThenAck sends an ack of an unknown command, which must change
// nothing, then the ack of the awaited command, which must reach want.
func (s *stack) strayThenAck(t *testing.T, id uuid.UUID, ack string, cmd domain.SidecarCommand, want func(*domain.AgentSession) bool) {
	t.Helper()
	before := s.session(t, id).Snapshot()
	n := len(s.activity(t, id))
	s.raw(t, id, ack, map[string]any{"command_id": uuid.NewString()})
	require.Eventually(t, func() bool { return len(s.activity(t, id)) == n+1 }, 30*time.Second, 20*time.Millisecond, "the stray %s is recorded", ack)
	assert.Equal(t, "UnknownEvent:"+ack, s.activity(t, id)[n], "a stray %s is recorded as unexpected", ack)
	assert.Equal(t, before, s.session(t, id).Snapshot(), "a stray %s changes nothing", ack)

	s.raw(t, id, ack, map[string]any{"command_id": s.awaited(t, id, cmd)})
	s.eventually(t, id, want, ack+" of the awaited command")
	require.Eventually(t, func() bool { return len(s.activity(t, id)) == n+2 }, 30*time.Second, 20*time.Millisecond, "the %s is recorded", ack)
	assert.Equal(t, "StatusChange:"+ack, s.activity(t, id)[n+1])
}

func status(want domain.SessionStatus) func(*domain.AgentSession) bool {
	return func(x *domain.AgentSession) bool { return x.Status() == want }
}

func TestAcksConfirmOnlyTheAwaitedCommand(t *testing.T) {
	s := start(t)
	id := s.runningSession(t)
	owner := s.owner.String()
	s.do(t, command.PauseSession, id, owner, nil)
	s.strayThenAck(t, id, "pause_ack", domain.SidecarPause, status(domain.StatusPaused))
	s.do(t, command.ResumeSession, id, owner, nil)
	s.strayThenAck(t, id, "resume_ack", domain.SidecarResume, status(domain.StatusRunning))
	s.do(t, command.InterruptSession, id, owner, nil)
	s.strayThenAck(t, id, "interrupt_ack", domain.SidecarInterrupt, status(domain.StatusInterrupted))
	s.do(t, command.ReloadSession, id, owner, nil)
	s.strayThenAck(t, id, "reload_config_ack", domain.SidecarReload, func(x *domain.AgentSession) bool { return !x.ReloadPending() })
	s.do(t, command.BeginTurn, id, "", nil)
	s.do(t, command.CancelSession, id, owner, nil)
	s.strayThenAck(t, id, "stop_ack", domain.SidecarStop, status(domain.StatusCancelled))

	// A pause_ack for no pause at all, while the session waits for an
	// answer, neither pauses it nor claims it did.
	waiting := s.runningSession(t)
	s.raw(t, waiting, "assistant_message", map[string]any{"message_id": "m1", "block_type": "tool_use", "tool_use_id": "t1",
		"tool_name": "AskUserQuestion", "input": map[string]any{"question": "Which branch?"}})
	s.eventually(t, waiting, status(domain.StatusWaitingForInput), "the question")
	s.raw(t, waiting, "pause_ack", map[string]any{"command_id": uuid.NewString()})
	require.Eventually(t, func() bool { return len(s.activity(t, waiting)) == 2 }, 30*time.Second, 20*time.Millisecond)
	assert.Equal(t, []string{"UserQuestion:assistant_message", "UnknownEvent:pause_ack"}, s.activity(t, waiting))
	assert.Equal(t, domain.StatusWaitingForInput, s.session(t, waiting).Status())
}

func TestAnErrorEndFailsTheSession(t *testing.T) {
	s := start(t)
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
	s.raw(t, id, "pause_ack", map[string]any{"command_id": s.awaited(t, id, domain.SidecarPause)})
	s.eventually(t, id, func(x *domain.AgentSession) bool { return x.Status() == domain.StatusPaused }, "the session goes on")

	require.Eventually(t, func() bool {
		stream, err := s.js.Stream(context.Background(), bus.StreamDLQ)
		if err != nil {
			return false
		}
		info, err := stream.Info(context.Background(), jetstream.WithSubjectFilter(bus.DLQSubject(acl.Consumer)))
		return err == nil && info.State.Msgs == 2
	}, 30*time.Second, 50*time.Millisecond, "both unreadable events are dead-lettered")
	// An ack's item is recorded after its command took effect.
	want := []string{"UnknownEvent:invalid", "UnknownEvent:assistant_message", "StatusChange:pause_ack"}
	require.Eventually(t, func() bool { return len(s.activity(t, id)) == len(want) }, 30*time.Second, 20*time.Millisecond)
	assert.Equal(t, want, s.activity(t, id))
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
	s.raw(t, id, "pause_ack", map[string]any{"command_id": s.awaited(t, id, domain.SidecarPause)})
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

// TestADeliveryToARunningSessionBeginsNoTurn: a message delivered while
// the session runs joins its turn; the ACL marks it delivered and sends no
// BeginTurn, which the session would refuse.
func TestADeliveryToARunningSessionBeginsNoTurn(t *testing.T) {
	ctx := context.Background()
	s := start(t)
	id := s.runningSession(t)
	require.Equal(t, domain.StatusRunning, s.session(t, id).Status())
	msgID := uuid.New()
	cmd, err := command.New(domain.AggregateQueue, command.EnqueueMessage, id, s.owner.String(),
		command.EnqueueData{MessageID: msgID, Content: "Also check the logs.", Priority: domain.PriorityImmediate})
	require.NoError(t, err)
	r, err := s.client.Do(ctx, cmd)
	require.NoError(t, err)
	require.NoError(t, r.Err())

	s.raw(t, id, "message_delivered", map[string]any{"message_id": msgID.String(), "priority": "Immediate"})
	// One session's raw events are handled in order, each after its
	// commands' results: the next one's item means the delivery is done.
	s.raw(t, id, "assistant_message", map[string]any{"message_id": "m1", "block_type": "text", "text": "On it."})
	require.Eventually(t, func() bool { return len(s.activity(t, id)) == 2 }, 30*time.Second, 20*time.Millisecond)

	q, err := postgres.Queues{}.Get(ctx, s.pool, id, s.owner)
	require.NoError(t, err)
	assert.Empty(t, q.Pending(), "the message is delivered")
	var refused []string
	rows, err := s.pool.Query(ctx, "SELECT result::text FROM processed_messages WHERE consumer = $1 AND result->'error' IS NOT NULL", commands.Consumer)
	require.NoError(t, err)
	for rows.Next() {
		var v string
		require.NoError(t, rows.Scan(&v))
		refused = append(refused, v)
	}
	require.NoError(t, rows.Err())
	assert.Empty(t, refused, "no command was refused")
	assert.Equal(t, domain.StatusRunning, s.session(t, id).Status())
}
