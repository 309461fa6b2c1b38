package reactions_test

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
	"github.com/agentbus/agentbus/bus/outbox"
	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/handlers/acl"
	"github.com/agentbus/agentbus/handlers/commands"
	"github.com/agentbus/agentbus/handlers/reactions"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/relay"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// flow runs the whole pipeline except the relay and the sidecar: the
// commands worker, the outbox publisher, the acl and every reaction. The
// test plays the sidecar: it reads the sidecar commands from
// AGENTS_SIDECAR_COMMANDS and publishes raw events as the relay would.
type flow struct {
	pool   *pgxpool.Pool
	js     jetstream.JetStream
	client *command.Client
	nc     *nats.Conn
	owner  uuid.UUID
	seq    int
}

func startFlow(t *testing.T, maxSessions int) *flow {
	t.Helper()
	return startFlowWithChainLimit(t, maxSessions, 0)
}

// startFlowWithChainLimit starts the flow with chains of at most
// maxChainSessions sessions (0: the default).
func startFlowWithChainLimit(t *testing.T, maxSessions, maxChainSessions int) *flow {
	t.Helper()
	pool := testenv.Postgres(t)
	_, js, nc := bustest.Server(t)
	sessionPool, err := domain.NewSessionPool(domain.SessionPoolConfig{MaxConcurrentSessions: maxSessions})
	require.NoError(t, err)
	d := commands.NewDispatcher(pool, nc, commands.Classify)
	commands.Register(d, nil, sessionPool)
	forwarder, err := outbox.New(postgres.NewOutbox(pool), js)
	require.NoError(t, err)
	forwarder.PollInterval = 50 * time.Millisecond
	d.ForwardEvents(forwarder)
	client, err := command.NewClient(nc, js, commands.Results{Pool: pool})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })

	ctx, cancel := context.WithCancel(context.Background())
	runs := []func(context.Context) error{
		func(ctx context.Context) error {
			return bus.Run(ctx, js, bus.RunnerConfig{Stream: bus.StreamCommands, Consumer: commands.Consumer, Handler: d.Handle, Concurrency: 4})
		},
		forwarder.Run,
		func(ctx context.Context) error { return acl.New(pool, client).Run(ctx, js) },
		reactions.SidecarDispatch{JS: js, DB: pool}.Run,
		reactions.Pool{JS: js, Client: client}.Run,
		reactions.Delivery{JS: js, DB: pool}.Run,
		reactions.Handoff{JS: js, DB: pool, Client: client, MaxChainSessions: maxChainSessions}.Run,
	}
	var wg sync.WaitGroup
	for _, run := range runs {
		wg.Add(1)
		go func() { defer wg.Done(); _ = run(ctx) }()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	return &flow{pool: pool, js: js, client: client, nc: nc, owner: uuid.New()}
}

func (f *flow) do(t *testing.T, aggregate, name string, id uuid.UUID, data any) command.Result {
	t.Helper()
	cmd, err := command.New(aggregate, name, id, f.owner.String(), data)
	require.NoError(t, err)
	r, err := f.client.Do(context.Background(), cmd)
	require.NoError(t, err)
	require.NoError(t, r.Err(), name)
	return r
}

func (f *flow) start(t *testing.T) uuid.UUID {
	return f.startWith(t, nil)
}

func (f *flow) startWith(t *testing.T, policy *domain.ToolApprovalPolicy) uuid.UUID {
	id := uuid.New()
	f.do(t, domain.AggregateSession, command.StartSession, id, command.StartSessionData{
		WorkingDirectory: "/work/repo", Objective: "Speed up the build", BudgetCapUsd: domain.Dollars(10), ToolApproval: policy})
	return id
}

func (f *flow) status(t *testing.T, id uuid.UUID) domain.SessionStatus {
	s, err := postgres.Sessions{}.Get(context.Background(), f.pool, id)
	require.NoError(t, err)
	return s.Status()
}

func (f *flow) waitStatus(t *testing.T, id uuid.UUID, want domain.SessionStatus) {
	t.Helper()
	require.Eventually(t, func() bool { return f.status(t, id) == want }, 30*time.Second, 20*time.Millisecond,
		"session %s never reached %s (is %s)", id, want, f.status(t, id))
}

// sidecarCommands returns the data of the commands of one type sent to
// the session's sidecar, in order.
func (f *flow) sidecarCommands(t *testing.T, id uuid.UUID, typ string) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	for _, env := range f.sidecarEnvelopes(t, id, typ) {
		out = append(out, env.Data)
	}
	return out
}

// ack answers the last command of type typ sent to the session's sidecar
// with its ack, echoing the command's id as a sidecar does.
func (f *flow) ack(t *testing.T, id uuid.UUID, typ, ack string) {
	t.Helper()
	f.waitSidecarCommand(t, id, typ, 1)
	envs := f.sidecarEnvelopes(t, id, typ)
	f.raw(t, id, ack, map[string]any{"command_id": envs[len(envs)-1].ID})
}

func (f *flow) sidecarEnvelopes(t *testing.T, id uuid.UUID, typ string) []bus.Envelope {
	t.Helper()
	stream, err := f.js.Stream(context.Background(), bus.StreamSidecarCommands)
	require.NoError(t, err)
	info, err := stream.Info(context.Background())
	require.NoError(t, err)
	var out []bus.Envelope
	subject := bus.SidecarCommandSubject(id.String(), typ)
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := stream.GetMsg(context.Background(), seq)
		if err != nil || m.Subject != subject {
			continue
		}
		env, err := bus.DecodeEnvelope(m.Data)
		require.NoError(t, err)
		out = append(out, env)
	}
	return out
}

func (f *flow) waitSidecarCommand(t *testing.T, id uuid.UUID, typ string, n int) []json.RawMessage {
	t.Helper()
	var got []json.RawMessage
	require.Eventually(t, func() bool { got = f.sidecarCommands(t, id, typ); return len(got) >= n },
		30*time.Second, 20*time.Millisecond, "sidecar of %s never got %d %s", id, n, typ)
	return got
}

// raw publishes a raw sidecar event as the relay does.
func (f *flow) raw(t *testing.T, id uuid.UUID, typ string, data any) {
	t.Helper()
	f.seq++
	raw, err := json.Marshal(data)
	require.NoError(t, err)
	body, err := json.Marshal(relay.Event{SessionID: id.String(), EntryID: fmt.Sprintf("%d-0", f.seq), Type: typ, TS: time.Now().UnixMilli(), Data: raw})
	require.NoError(t, err)
	msg := &nats.Msg{Subject: bus.SidecarEventSubject(id.String(), typ), Data: body, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s:%d-0", id, f.seq))
	_, err = f.js.PublishMsg(context.Background(), msg)
	require.NoError(t, err)
}

func TestNewSessionIsAllocatedAndPauseResumeRoundTrips(t *testing.T) {
	f := startFlow(t, 0)
	id := f.start(t)
	f.waitStatus(t, id, domain.StatusRunning)

	f.do(t, domain.AggregateSession, command.PauseSession, id, nil)
	f.ack(t, id, protocol.CommandPause, "pause_ack")
	f.waitStatus(t, id, domain.StatusPaused)

	f.do(t, domain.AggregateSession, command.ResumeSession, id, nil)
	f.ack(t, id, protocol.CommandResume, "resume_ack")
	f.waitStatus(t, id, domain.StatusRunning)
}

func TestFullPoolQueuesAndStartsWhenASlotFrees(t *testing.T) {
	f := startFlow(t, 1)
	first := f.start(t)
	f.waitStatus(t, first, domain.StatusRunning)
	second := f.start(t)
	require.Eventually(t, func() bool {
		var n int
		_ = f.pool.QueryRow(context.Background(), "SELECT count(*) FROM outbox WHERE aggregate_id = $1 AND type = 'session_pool_exhausted'", second).Scan(&n)
		var published bool
		stream, err := f.js.Stream(context.Background(), bus.StreamEvents)
		if err == nil {
			_, err = stream.GetLastMsgForSubject(context.Background(), bus.EventSubject("session", second.String(), "session_pool_exhausted"))
			published = err == nil
		}
		return n > 0 || published
	}, 30*time.Second, 20*time.Millisecond, "the full pool is reported")
	assert.Equal(t, domain.StatusQueued, f.status(t, second))

	f.do(t, domain.AggregateSession, command.CancelSession, first, nil)
	f.ack(t, first, protocol.CommandStop, "stop_ack")
	f.waitStatus(t, first, domain.StatusCancelled)
	f.waitStatus(t, second, domain.StatusRunning)
}

func TestCancelWhileQueuedNeedsNoSidecar(t *testing.T) {
	f := startFlow(t, 1)
	running := f.start(t)
	f.waitStatus(t, running, domain.StatusRunning)
	queued := f.start(t)
	time.Sleep(200 * time.Millisecond) // let the pool try, and fail, to allocate it
	f.do(t, domain.AggregateSession, command.CancelSession, queued, nil)
	f.waitStatus(t, queued, domain.StatusCancelled)
	assert.Empty(t, f.sidecarCommands(t, queued, protocol.CommandStop))
}

func TestImmediateGoesAtOnceAndQueuedAfterTheTurn(t *testing.T) {
	f := startFlow(t, 0)
	id := f.start(t)
	f.waitStatus(t, id, domain.StatusRunning)

	queued := uuid.New()
	f.do(t, domain.AggregateQueue, command.EnqueueMessage, id, command.EnqueueData{MessageID: queued, Content: "then update the docs", Priority: domain.PriorityQueued})
	immediate := uuid.New()
	f.do(t, domain.AggregateQueue, command.EnqueueMessage, id, command.EnqueueData{MessageID: immediate, Content: "use make, not bazel", Priority: domain.PriorityImmediate})

	got := f.waitSidecarCommand(t, id, protocol.CommandSteeringMessage, 1)
	var first protocol.SteeringMessage
	require.NoError(t, json.Unmarshal(got[0], &first))
	assert.Equal(t, immediate.String(), first.MessageID, "Immediate overtakes Queued while the turn runs")
	time.Sleep(200 * time.Millisecond)
	assert.Len(t, f.sidecarCommands(t, id, protocol.CommandSteeringMessage), 1, "Queued waits for the turn to end")

	f.raw(t, id, "message_delivered", map[string]any{"message_id": immediate.String(), "priority": "Immediate"})
	f.raw(t, id, "session_end", map[string]any{"status": "success", "reason": "completed", "exit_code": 0})
	f.waitStatus(t, id, domain.StatusIdle)
	got = f.waitSidecarCommand(t, id, protocol.CommandSteeringMessage, 2)
	var second protocol.SteeringMessage
	require.NoError(t, json.Unmarshal(got[1], &second))
	assert.Equal(t, queued.String(), second.MessageID)
}

func TestNothingIsDeliveredWhileWaitingForInput(t *testing.T) {
	f := startFlow(t, 0)
	id := f.start(t)
	f.waitStatus(t, id, domain.StatusRunning)
	f.raw(t, id, "assistant_message", map[string]any{"message_id": "m1", "block_type": "tool_use", "tool_use_id": "t1",
		"tool_name": "AskUserQuestion", "input": map[string]any{"question": "Which branch?", "options": []string{"main", "dev"}}})
	f.waitStatus(t, id, domain.StatusWaitingForInput)
	msg := uuid.New()
	f.do(t, domain.AggregateQueue, command.EnqueueMessage, id, command.EnqueueData{MessageID: msg, Content: "also run the linter", Priority: domain.PriorityImmediate})
	time.Sleep(200 * time.Millisecond)
	assert.Empty(t, f.sidecarCommands(t, id, protocol.CommandSteeringMessage), "a waiting session takes no message")

	f.do(t, domain.AggregateSession, command.AnswerQuestion, id, command.AnswerData{Answer: "main"})
	answers := f.waitSidecarCommand(t, id, protocol.CommandAnswerQuestion, 1)
	var answer protocol.AnswerQuestion
	require.NoError(t, json.Unmarshal(answers[0], &answer))
	assert.Equal(t, "main", answer.Answer)
	f.waitSidecarCommand(t, id, protocol.CommandSteeringMessage, 1)
}

func TestPermissionDecisionsReachTheSidecar(t *testing.T) {
	f := startFlow(t, 0)
	free := f.start(t)
	f.waitStatus(t, free, domain.StatusRunning)
	f.raw(t, free, "permission_request", map[string]any{"request_id": "r0", "tool_use_id": "t0", "tool_name": "Read",
		"input": map[string]any{"path": "go.mod"}, "timeout_ms": 60000})
	got := f.waitSidecarCommand(t, free, protocol.CommandPermissionResponse, 1)
	var allowed protocol.PermissionResponse
	require.NoError(t, json.Unmarshal(got[0], &allowed))
	assert.Equal(t, protocol.BehaviorAllow, allowed.Behavior, "a tool the policy does not gate is allowed at once")

	id := f.startWith(t, &domain.ToolApprovalPolicy{Mode: domain.ApprovalAll, Timeout: time.Minute, OnTimeout: domain.TimeoutDeny})
	f.waitStatus(t, id, domain.StatusRunning)
	f.raw(t, id, "permission_request", map[string]any{"request_id": "r1", "tool_use_id": "t1", "tool_name": "Bash",
		"input": map[string]any{"command": "rm -rf build"}, "timeout_ms": 60000})
	require.Eventually(t, func() bool {
		s, err := postgres.Sessions{}.Get(context.Background(), f.pool, id)
		return err == nil && s.PendingPermission() != nil
	}, 30*time.Second, 20*time.Millisecond)
	assert.Equal(t, domain.StatusWaitingForApproval, f.status(t, id))
	f.do(t, domain.AggregateSession, command.DenyPermission, id, command.PermissionDecisionData{RequestID: "r1", Message: "not the build dir"})
	got = f.waitSidecarCommand(t, id, protocol.CommandPermissionResponse, 1)
	var resp protocol.PermissionResponse
	require.NoError(t, json.Unmarshal(got[0], &resp))
	assert.Equal(t, protocol.PermissionResponse{RequestID: "r1", Behavior: protocol.BehaviorDeny, Message: "not the build dir"}, resp)
}
