package main

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
	agentcmd "github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/relay"
	"github.com/agentbus/agentbus/sidecar/launcher"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// wait is how long any asynchronous step of the system may take.
const wait = 30 * time.Second

// system is every registered worker running in the test process on one
// NATS server, one database and one Redis, as `agentbus up` runs them.
// The runtime runs in external mode: the test plays each session's
// sidecar on Redis.
type system struct {
	in     *infra
	client *agentcmd.Client

	mu      sync.Mutex
	running map[string]*runningWorker
}

type runningWorker struct {
	cancel context.CancelFunc
	done   chan error
}

func startSystem(t *testing.T) *system {
	t.Helper()
	t.Setenv("AGENTBUS_RUNTIME", string(launcher.ModeExternal))
	t.Setenv("AGENTBUS_DATA_DIR", t.TempDir())
	_, js, nc := bustest.Server(t)
	pool, err := pgxpool.New(context.Background(), withPoolSize(testenv.PostgresURL(t), poolSize(workerNames()...)+4))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	in := &infra{Pool: pool, NC: nc, JS: js, Redis: testenv.Redis(t), RedisURL: testenv.RedisURL(t)}
	t.Cleanup(in.Close)

	s := &system{in: in, running: map[string]*runningWorker{}}
	for _, name := range workerNames() {
		s.startWorker(t, name)
	}
	t.Cleanup(func() {
		for _, name := range workerNames() {
			s.stopWorker(t, name)
		}
	})
	s.client, err = commandClient(in)
	require.NoError(t, err)
	return s
}

// startWorker runs the registered worker name, as `agentbus worker name` would.
func (s *system) startWorker(t *testing.T, name string) {
	t.Helper()
	w, ok := workers[name]
	require.True(t, ok, "no worker %s", name)
	ctx, cancel := context.WithCancel(context.Background())
	rw := &runningWorker{cancel: cancel, done: make(chan error, 1)}
	go func() { rw.done <- w.run(ctx, s.in) }()
	s.mu.Lock()
	s.running[name] = rw
	s.mu.Unlock()
}

// stopWorker ends the worker's context, as a stopped process would, and
// waits for it.
func (s *system) stopWorker(t *testing.T, name string) {
	t.Helper()
	s.mu.Lock()
	rw := s.running[name]
	delete(s.running, name)
	s.mu.Unlock()
	if rw == nil {
		return
	}
	rw.cancel()
	select {
	case err := <-rw.done:
		if !errors.Is(err, context.Canceled) {
			assert.NoError(t, err, "worker %s", name)
		}
	case <-time.After(wait):
		t.Errorf("worker %s did not stop", name)
	}
}

// owner is a user of its own, so that its sessions have a pool of their own.
func (s *system) owner() string { return uuid.NewString() }

func (s *system) do(t *testing.T, owner, aggregate, name string, id uuid.UUID, data any) agentcmd.Result {
	t.Helper()
	cmd, err := agentcmd.New(aggregate, name, id, owner, data)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	r, err := s.client.Do(ctx, cmd)
	require.NoError(t, err, name)
	require.NoError(t, r.Err(), name)
	return r
}

func (s *system) startSession(t *testing.T, owner string, data agentcmd.StartSessionData) uuid.UUID {
	t.Helper()
	if data.WorkingDirectory == "" {
		data.WorkingDirectory = "/work/repo"
	}
	if data.Objective == "" {
		data.Objective = "Speed up the build"
	}
	if data.BudgetCapUsd == 0 {
		data.BudgetCapUsd = domain.Dollars(10)
	}
	id := uuid.New()
	s.do(t, owner, domain.AggregateSession, agentcmd.StartSession, id, data)
	return id
}

func (s *system) session(t *testing.T, id uuid.UUID) *domain.AgentSession {
	t.Helper()
	got, err := postgres.Sessions{}.Get(context.Background(), s.in.Pool, id)
	require.NoError(t, err)
	return got
}

func (s *system) waitStatus(t *testing.T, id uuid.UUID, want domain.SessionStatus) *domain.AgentSession {
	t.Helper()
	var got *domain.AgentSession
	require.Eventually(t, func() bool {
		var err error
		got, err = postgres.Sessions{}.Get(context.Background(), s.in.Pool, id)
		return err == nil && got.Status() == want
	}, wait, 20*time.Millisecond, "session %s never reached %s", id, want)
	return got
}

// events returns the types of the events on AGENTS_EVENTS of one
// aggregate, in stream order.
func (s *system) events(t *testing.T, aggregate string, id uuid.UUID) []string {
	t.Helper()
	ctx := context.Background()
	stream, err := s.in.JS.Stream(ctx, bus.StreamEvents)
	require.NoError(t, err)
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{bus.EventSubject(aggregate, id.String(), "*")}})
	require.NoError(t, err)
	info, err := cons.Info(ctx)
	require.NoError(t, err)
	var types []string
	for range info.NumPending {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		require.NoError(t, err)
		env, err := bus.DecodeEnvelope(m.Data())
		require.NoError(t, err)
		types = append(types, env.Type)
	}
	return types
}

// waitEvent waits for an event of the type on AGENTS_EVENTS and returns its data.
func (s *system) waitEvent(t *testing.T, aggregate string, id uuid.UUID, typ string) json.RawMessage {
	t.Helper()
	var data json.RawMessage
	require.Eventually(t, func() bool {
		stream, err := s.in.JS.Stream(context.Background(), bus.StreamEvents)
		if err != nil {
			return false
		}
		m, err := stream.GetLastMsgForSubject(context.Background(), bus.EventSubject(aggregate, id.String(), typ))
		if err != nil {
			return false
		}
		env, err := bus.DecodeEnvelope(m.Data)
		data = env.Data
		return err == nil
	}, wait, 20*time.Millisecond, "no %s event of %s %s on AGENTS_EVENTS", typ, aggregate, id)
	return data
}

// activity returns the activity items recorded for the session: raw type
// and item type, in order.
func (s *system) activity(t *testing.T, id uuid.UUID) [][2]string {
	t.Helper()
	rows, err := s.in.Pool.Query(context.Background(),
		"SELECT raw_type, type FROM activity_items WHERE session_id = $1 ORDER BY source_seq", id)
	require.NoError(t, err)
	defer rows.Close()
	var out [][2]string
	for rows.Next() {
		var item [2]string
		require.NoError(t, rows.Scan(&item[0], &item[1]))
		out = append(out, item)
	}
	require.NoError(t, rows.Err())
	return out
}

// fakeSidecar plays one session's sidecar on its Redis streams, in the wire
// format of sidecar/README.md.
type fakeSidecar struct {
	rdb *redis.Client
	id  uuid.UUID
}

func (s *system) sidecar(id uuid.UUID) *fakeSidecar { return &fakeSidecar{rdb: s.in.Redis, id: id} }

// runningSession starts a session for owner, waits until it runs, and returns it
// with the sidecar the test plays for it.
func (s *system) runningSession(t *testing.T, owner string, data agentcmd.StartSessionData) (uuid.UUID, *fakeSidecar) {
	t.Helper()
	id := s.startSession(t, owner, data)
	s.waitStatus(t, id, domain.StatusRunning)
	return id, s.sidecar(id)
}

// sidecarCommand is one entry of the session's command stream.
type sidecarCommand struct {
	Type      string
	CommandID string
	Data      json.RawMessage
}

// send writes one raw event.
func (sc *fakeSidecar) send(t *testing.T, typ string, data any) {
	t.Helper()
	raw, err := json.Marshal(data)
	require.NoError(t, err)
	sc.sendFields(t, map[string]any{"type": typ, "data": string(raw), "ts": strconv.FormatInt(time.Now().UnixMilli(), 10)})
}

// sendFields writes an entry with exactly these fields.
func (sc *fakeSidecar) sendFields(t *testing.T, fields map[string]any) {
	t.Helper()
	require.NoError(t, sc.rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: relay.EventsKey(sc.id.String()), Values: fields}).Err())
}

// commands returns the commands the sidecar was sent, in order.
func (sc *fakeSidecar) commands(t *testing.T) []sidecarCommand {
	t.Helper()
	entries, err := sc.rdb.XRange(context.Background(), relay.CommandsKey(sc.id.String()), "-", "+").Result()
	require.NoError(t, err)
	out := make([]sidecarCommand, 0, len(entries))
	for _, e := range entries {
		typ, _ := e.Values["type"].(string)
		id, _ := e.Values["command_id"].(string)
		data, _ := e.Values["data"].(string)
		ts, _ := e.Values["ts"].(string)
		_, err := strconv.ParseInt(ts, 10, 64)
		require.NoError(t, err, "a command's ts is Unix milliseconds")
		require.NoError(t, uuid.Validate(id), "every command carries a command_id")
		require.True(t, json.Valid([]byte(data)), "a command's data is JSON: %q", data)
		out = append(out, sidecarCommand{Type: typ, CommandID: id, Data: json.RawMessage(data)})
	}
	return out
}

func (sc *fakeSidecar) commandsOf(t *testing.T, typ string) []sidecarCommand {
	t.Helper()
	var out []sidecarCommand
	for _, c := range sc.commands(t) {
		if c.Type == typ {
			out = append(out, c)
		}
	}
	return out
}

// waitCommand waits until the sidecar was sent n commands of the type and
// returns them.
func (sc *fakeSidecar) waitCommand(t *testing.T, typ string, n int) []sidecarCommand {
	t.Helper()
	var got []sidecarCommand
	require.Eventually(t, func() bool { got = sc.commandsOf(t, typ); return len(got) >= n },
		wait, 20*time.Millisecond, "the sidecar of %s never got %d %s", sc.id, n, typ)
	return got
}

// ack answers a lifecycle command the way a sidecar does.
func (sc *fakeSidecar) ack(t *testing.T, cmd sidecarCommand, typ string) {
	t.Helper()
	sc.send(t, typ, map[string]any{"command_id": cmd.CommandID})
}

// waitStarted waits until the runtime handed the session's config to its
// sidecar (the external launcher's start) and writes session_started.
func (sc *fakeSidecar) waitStarted(t *testing.T) protocol.Config {
	t.Helper()
	var cfg protocol.Config
	require.Eventually(t, func() bool {
		raw, err := sc.rdb.Get(context.Background(), protocol.ConfigKey(sc.id.String())).Bytes()
		if err != nil {
			return false
		}
		cfg, err = protocol.ParseConfig(raw)
		return err == nil
	}, wait, 20*time.Millisecond, "the sidecar of %s was never started", sc.id)
	sc.send(t, protocol.EventSessionStarted, map[string]any{"engine": "script", "engine_session_id": "script-" + sc.id.String(),
		"model": "claude-sonnet-4-5", "working_directory": cfg.WorkingDirectory, "resumed": false, "restarted": false, "pid": 4242})
	return cfg
}

func (sc *fakeSidecar) text(t *testing.T, msg, text string) {
	t.Helper()
	sc.send(t, protocol.EventAssistantMessage, map[string]any{"message_id": msg, "block_type": "text", "text": text, "model": "claude-sonnet-4-5"})
}

func (sc *fakeSidecar) toolUse(t *testing.T, toolUseID, tool string, input any) {
	t.Helper()
	sc.send(t, protocol.EventAssistantMessage, map[string]any{"message_id": "msg-" + toolUseID, "block_type": "tool_use",
		"tool_use_id": toolUseID, "tool_name": tool, "input": input, "model": "claude-sonnet-4-5"})
}

func (sc *fakeSidecar) usage(t *testing.T, cost float64, used int) {
	t.Helper()
	sc.send(t, protocol.EventUsageUpdate, map[string]any{"model": "claude-sonnet-4-5", "cost_usd": cost, "input_tokens": 1000,
		"output_tokens": 100, "cache_read_tokens": 0, "cache_write_tokens": 0,
		"context_window_used_tokens": used, "context_window_max_tokens": 200000, "is_subagent": false})
}

func (sc *fakeSidecar) turnCompleted(t *testing.T, final bool) {
	t.Helper()
	sc.send(t, protocol.EventTurnCompleted, map[string]any{"cost_usd": 0.01, "total_cost_usd": 0.01, "duration_ms": 1200, "num_turns": 1, "final": final})
}

func (sc *fakeSidecar) end(t *testing.T, reason string) {
	t.Helper()
	sc.send(t, protocol.EventSessionEnd, map[string]any{"status": "success", "reason": reason, "exit_code": 0,
		"num_turns": 1, "total_cost_usd": 0.01, "duration_ms": 2400})
}

// steering decodes the steering messages the sidecar was sent.
func steering(t *testing.T, cmds []sidecarCommand) []protocol.SteeringMessage {
	t.Helper()
	out := make([]protocol.SteeringMessage, 0, len(cmds))
	for _, c := range cmds {
		var m protocol.SteeringMessage
		require.NoError(t, json.Unmarshal(c.Data, &m))
		out = append(out, m)
	}
	return out
}

// types returns the command types in order.
func types(cmds []sidecarCommand) []string {
	out := make([]string, 0, len(cmds))
	for _, c := range cmds {
		out = append(out, c.Type)
	}
	return out
}

// consumerHasWork reports whether a durable consumer holds messages not
// yet acknowledged.
func (s *system) consumerHasWork(stream, consumer string) bool {
	cons, err := s.in.JS.Consumer(context.Background(), stream, consumer)
	if err != nil {
		return false
	}
	info, err := cons.Info(context.Background())
	return err == nil && info.NumPending+uint64(info.NumAckPending) > 0
}
