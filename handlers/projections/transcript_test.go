package projections_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
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
	"github.com/agentbus/agentbus/handlers/projections"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/relay"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type stack struct {
	pool *pgxpool.Pool
	js   jetstream.JetStream
	seq  int
	ts   int64
}

// start returns Postgres and JetStream; with run set, the transcript worker
// consumes AGENTS_SIDECAR_EVENTS until the test ends.
func start(t *testing.T, run bool) *stack {
	t.Helper()
	pool := testenv.Postgres(t)
	_, js, _ := bustest.Server(t)
	s := &stack{pool: pool, js: js, ts: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC).UnixMilli()}
	if run {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { _ = projections.NewTranscript(pool).Run(ctx, js) })
		t.Cleanup(func() { cancel(); wg.Wait() })
	}
	return s
}

// raw publishes a raw event of session id as the relay does.
func (s *stack) raw(t *testing.T, id uuid.UUID, typ string, data any) {
	t.Helper()
	s.seq++
	s.ts += 250
	body := relay.Event{SessionID: id.String(), EntryID: fmt.Sprintf("%d-0", s.seq), Type: typ, TS: s.ts}
	raw, err := json.Marshal(data)
	require.NoError(t, err)
	body.Data = raw
	payload, err := json.Marshal(body)
	require.NoError(t, err)
	s.publish(t, id, typ, body.EntryID, payload)
}

func (s *stack) publish(t *testing.T, id uuid.UUID, typ, entryID string, payload []byte) {
	t.Helper()
	msg := &nats.Msg{Subject: bus.SidecarEventSubject(id.String(), typ), Data: payload, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, relay.MsgID(id.String(), entryID))
	_, err := s.js.PublishMsg(context.Background(), msg)
	require.NoError(t, err)
}

// session publishes a session's raw events: text, a tool call and its
// result, a subagent with a message and a tool call of its own, usage, and
// the session's end. It returns how many events it published.
func (s *stack) session(t *testing.T, id uuid.UUID) int {
	t.Helper()
	events := []struct {
		typ  string
		data map[string]any
	}{
		{"session_started", map[string]any{"engine": "script", "model": "claude-sonnet-4-5"}},
		{"assistant_message", map[string]any{"message_id": "m1", "block_type": "text", "text": "Looking at the logs.", "model": "claude-sonnet-4-5"}},
		{"assistant_message", map[string]any{"message_id": "m2", "block_type": "tool_use", "tool_use_id": "toolu_1",
			"tool_name": "Bash", "input": map[string]any{"command": "ls /var/log"}}},
		{"tool_result", map[string]any{"tool_use_id": "toolu_1", "content": "syslog\nauth.log", "is_error": false}},
		{"assistant_message", map[string]any{"message_id": "m3", "block_type": "tool_use", "tool_use_id": "toolu_task",
			"tool_name": "Task", "input": map[string]any{"description": "Survey", "prompt": "Survey the rotation settings", "subagent_type": "Explore"}}},
		{"subagent_message", map[string]any{"subagent_id": "agent_1", "subagent_type": "Explore", "parent_tool_use_id": "toolu_task",
			"message_id": "m4", "text": "Reading logrotate.conf", "model": "claude-haiku-4-5"}},
		{"assistant_message", map[string]any{"message_id": "m5", "block_type": "tool_use", "tool_use_id": "toolu_sub",
			"tool_name": "Read", "input": map[string]any{"file_path": "/etc/logrotate.conf"}, "subagent_id": "agent_1", "parent_tool_use_id": "toolu_task"}},
		{"tool_result", map[string]any{"tool_use_id": "toolu_sub", "content": "weekly\nrotate 4", "is_error": false,
			"subagent_id": "agent_1", "parent_tool_use_id": "toolu_task"}},
		{"usage_update", map[string]any{"model": "claude-haiku-4-5", "cost_usd": 0.01, "is_subagent": true, "subagent_id": "agent_1"}},
		{"tool_result", map[string]any{"tool_use_id": "toolu_task", "content": "Rotation is weekly, 4 kept.", "is_error": false}},
		{"assistant_message", map[string]any{"message_id": "m6", "block_type": "tool_use", "tool_use_id": "toolu_2",
			"tool_name": "Bash", "input": map[string]any{"command": "rm /nope"}}},
		{"tool_result", map[string]any{"tool_use_id": "toolu_2", "content": "rm: cannot remove", "is_error": true}},
		{"assistant_message", map[string]any{"message_id": "m7", "block_type": "text", "text": "Done: rotation is weekly."}},
		{"session_end", map[string]any{"status": "success", "reason": "completed", "exit_code": 0}},
	}
	for _, e := range events {
		s.raw(t, id, e.typ, e.data)
	}
	return len(events)
}

// tables are the transcript tables, each with the order of its rows.
var tables = []struct{ name, order string }{
	{"agent_messages", "source_seq"},
	{"tool_calls", "source_seq"},
	{"subagent_sessions", "source_seq"},
	{"session_log_chunks", "recorded_at, source_seq"},
}

// rows reads every column of a session's rows of table, in order.
func (s *stack) rows(t *testing.T, table, order string, id uuid.UUID) [][]any {
	t.Helper()
	rows, err := s.pool.Query(context.Background(),
		fmt.Sprintf("SELECT * FROM %s WHERE session_id = $1 ORDER BY %s", table, order), id)
	require.NoError(t, err)
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		v, err := rows.Values()
		require.NoError(t, err)
		out = append(out, v)
	}
	require.NoError(t, rows.Err())
	return out
}

// snapshot reads all of a session's transcript rows.
func (s *stack) snapshot(t *testing.T, id uuid.UUID) map[string][][]any {
	out := map[string][][]any{}
	for _, tb := range tables {
		out[tb.name] = s.rows(t, tb.name, tb.order, id)
	}
	return out
}

func (s *stack) count(t *testing.T, table string, id uuid.UUID) int {
	var n int
	require.NoError(t, s.pool.QueryRow(context.Background(),
		fmt.Sprintf("SELECT count(*) FROM %s WHERE session_id = $1", table), id).Scan(&n))
	return n
}

// caughtUp waits until the transcript consumer has handled every message.
func (s *stack) caughtUp(t *testing.T) {
	t.Helper()
	require.Eventually(t, bustest.CaughtUp(s.js, bus.StreamSidecarEvents, projections.Consumer),
		30*time.Second, 20*time.Millisecond, "the transcript worker caught up")
}

// replay hands every stored raw event of session id to h, from the
// stream's start, as a rebuild does.
func (s *stack) replay(t *testing.T, id uuid.UUID, n int, h func(jetstream.Msg)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := s.js.Stream(ctx, bus.StreamSidecarEvents)
	require.NoError(t, err)
	c, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{bus.SidecarEventSubject(id.String(), "*")}, DeliverPolicy: jetstream.DeliverAllPolicy})
	require.NoError(t, err)
	for range n {
		m, err := c.Next(jetstream.FetchMaxWait(10 * time.Second))
		require.NoError(t, err)
		h(m)
	}
}

type message struct {
	Source, Content string
	Sub             bool
}

func (s *stack) messages(t *testing.T, id uuid.UUID) []message {
	rows, err := s.pool.Query(context.Background(),
		"SELECT source, content, subagent_id IS NOT NULL FROM agent_messages WHERE session_id = $1 ORDER BY source_seq", id)
	require.NoError(t, err)
	defer rows.Close()
	var out []message
	for rows.Next() {
		var m message
		require.NoError(t, rows.Scan(&m.Source, &m.Content, &m.Sub))
		out = append(out, m)
	}
	return out
}

func TestTranscriptOfASession(t *testing.T) {
	s := start(t, true)
	id := uuid.New()
	s.session(t, id)
	s.caughtUp(t)
	ctx := context.Background()

	assert.Equal(t, []message{
		{"Agent", "Looking at the logs.", false},
		{"SubAgent", "Reading logrotate.conf", true},
		{"Agent", "Done: rotation is weekly.", false},
	}, s.messages(t, id), "text blocks become messages; a subagent's carry its id")

	type call struct {
		Name, Input, Status string
		Result              *string
		IsError             *bool
		Sub                 bool
	}
	rows, err := s.pool.Query(ctx, `SELECT tool_name, input, status, result, result_is_error, subagent_id IS NOT NULL
		FROM tool_calls WHERE session_id = $1 ORDER BY source_seq`, id)
	require.NoError(t, err)
	var calls []call
	for rows.Next() {
		var c call
		require.NoError(t, rows.Scan(&c.Name, &c.Input, &c.Status, &c.Result, &c.IsError, &c.Sub))
		calls = append(calls, c)
	}
	require.NoError(t, rows.Err())
	str := func(s string) *string { return &s }
	yes, no := true, false
	assert.Equal(t, []call{
		{"Bash", `{"command":"ls /var/log"}`, "Success", str("syslog\nauth.log"), &no, false},
		{"Task", `{"description":"Survey","prompt":"Survey the rotation settings","subagent_type":"Explore"}`, "Success", str("Rotation is weekly, 4 kept."), &no, false},
		{"Read", `{"file_path":"/etc/logrotate.conf"}`, "Success", str("weekly\nrotate 4"), &no, true},
		{"Bash", `{"command":"rm /nope"}`, "Error", str("rm: cannot remove"), &yes, false},
	}, calls, "each result is attached to its call, never a message")

	var (
		sub                                     uuid.UUID
		engineID, typ, model, objective, status string
		completed                               *time.Time
	)
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT id, engine_subagent_id, subagent_type, model_id, objective, status, completed_at
		FROM subagent_sessions WHERE session_id = $1`, id).Scan(&sub, &engineID, &typ, &model, &objective, &status, &completed))
	assert.Equal(t, uuid.NewSHA1(uuid.NameSpaceOID, []byte("agent_1")), sub, "the id the activity stream names the subagent by")
	assert.Equal(t, []string{"agent_1", "Explore", "claude-haiku-4-5", "Survey the rotation settings", "Completed"},
		[]string{engineID, typ, model, objective, status}, "the subagent takes its objective from its Task call and completes with it")
	assert.NotNil(t, completed)
	var subCalls int
	require.NoError(t, s.pool.QueryRow(ctx, "SELECT count(*) FROM tool_calls WHERE session_id = $1 AND subagent_id = $2", id, sub).Scan(&subCalls))
	assert.Equal(t, 1, subCalls, "the subagent's tool call is its own")

	var log []string
	rows, err = s.pool.Query(ctx, "SELECT content FROM session_log_chunks WHERE session_id = $1 ORDER BY recorded_at, source_seq", id)
	require.NoError(t, err)
	for rows.Next() {
		var c string
		require.NoError(t, rows.Scan(&c))
		log = append(log, c)
	}
	assert.Equal(t, []string{
		"Looking at the logs.",
		`[tool] Bash {"command":"ls /var/log"}`,
		"[result] syslog\nauth.log",
		`[tool] Task {"description":"Survey","prompt":"Survey the rotation settings","subagent_type":"Explore"}`,
		"[result] Rotation is weekly, 4 kept.",
		`[tool] Bash {"command":"rm /nope"}`,
		"[error] rm: cannot remove",
		"Done: rotation is weekly.",
		"[end] success: completed",
	}, log, "the log is the parent's output; the subagent's stays in its own transcript")
}

func TestFailedTaskFailsItsSubagent(t *testing.T) {
	s := start(t, true)
	id := uuid.New()
	s.raw(t, id, "assistant_message", map[string]any{"message_id": "m1", "block_type": "tool_use", "tool_use_id": "toolu_task",
		"tool_name": "Task", "input": map[string]any{"description": "Build it"}})
	s.raw(t, id, "subagent_message", map[string]any{"subagent_id": "agent_9", "parent_tool_use_id": "toolu_task", "message_id": "m2", "text": "Building"})
	s.raw(t, id, "tool_result", map[string]any{"tool_use_id": "toolu_task", "content": "interrupted", "is_error": true})
	s.caughtUp(t)
	var status, reason, objective string
	require.NoError(t, s.pool.QueryRow(context.Background(),
		"SELECT status, failure_reason, objective FROM subagent_sessions WHERE session_id = $1", id).Scan(&status, &reason, &objective))
	assert.Equal(t, []string{"Failed", "AgentError", "Build it"}, []string{status, reason, objective})
}

func TestMalformedRawEventsAreSkippedAndTheTranscriptGoesOn(t *testing.T) {
	s := start(t, true)
	id := uuid.New()
	s.seq++
	invalid, err := json.Marshal(relay.Event{SessionID: id.String(), EntryID: "900-0", Type: relay.TypeInvalid,
		Error: "data is not JSON", Fields: map[string]string{"type": "assistant_message", "data": "{oops"}})
	require.NoError(t, err)
	s.publish(t, id, relay.TypeInvalid, "900-0", invalid)
	s.publish(t, id, "assistant_message", "901-0", []byte("not json"))
	s.raw(t, id, "assistant_message", map[string]any{"message_id": "m1", "block_type": "text", "text": 42})
	s.raw(t, id, "tool_result", map[string]any{"tool_use_id": "toolu_unknown", "content": "orphan", "is_error": false})
	s.raw(t, id, "assistant_message", map[string]any{"message_id": "m2", "block_type": "text", "text": "Still here."})
	s.caughtUp(t)

	assert.Equal(t, []message{{"Agent", "Still here.", false}}, s.messages(t, id), "only the readable text is a message")
	assert.Zero(t, s.count(t, "tool_calls", id), "a result without its call attaches to nothing")
	stream, err := s.js.Stream(context.Background(), bus.StreamDLQ)
	require.NoError(t, err)
	info, err := stream.Info(context.Background(), jetstream.WithSubjectFilter(bus.DLQSubject(projections.Consumer)))
	require.NoError(t, err)
	assert.Zero(t, info.State.Msgs, "the acl worker dead-letters unreadable events; the transcript only skips them")
}

// TestReplayingTheRawEventsRebuildsTheSameTranscript deletes a session's
// projected rows and replays its raw events from the start of
// AGENTS_SIDECAR_EVENTS, as a rebuild does: every row comes back the same.
// A decision the agent logged is not the projection's and stays.
func TestReplayingTheRawEventsRebuildsTheSameTranscript(t *testing.T) {
	s := start(t, true)
	id := uuid.New()
	n := s.session(t, id)
	s.caughtUp(t)
	ctx := context.Background()
	_, err := s.pool.Exec(ctx, `INSERT INTO session_log_chunks (id, session_id, kind, content, recorded_at)
		VALUES ($1, $2, 'decision', 'Keep the layout', now())`, uuid.New(), id)
	require.NoError(t, err)
	before := s.snapshot(t, id)
	for _, tb := range tables {
		require.NotEmpty(t, before[tb.name], tb.name)
	}

	for _, table := range []string{"agent_messages", "tool_calls", "tool_results", "subagent_sessions"} {
		_, err := s.pool.Exec(ctx, fmt.Sprintf("DELETE FROM %s WHERE session_id = $1", table), id)
		require.NoError(t, err)
	}
	_, err = s.pool.Exec(ctx, "DELETE FROM session_log_chunks WHERE session_id = $1 AND kind = 'output'", id)
	require.NoError(t, err)

	rebuild := projections.NewTranscript(s.pool)
	s.replay(t, id, n, func(m jetstream.Msg) { require.NoError(t, rebuild.Handle(ctx, m)) })
	assert.Equal(t, before, s.snapshot(t, id), "the rebuilt transcript is the same, row for row")
}

// TestRedeliveredRawEventsWriteOnce hands every raw event to the
// projection twice, as an at-least-once delivery may: each row is written
// once, and a result already attached is not attached again.
func TestRedeliveredRawEventsWriteOnce(t *testing.T) {
	s := start(t, false)
	id := uuid.New()
	n := s.session(t, id)
	ctx := context.Background()
	w := projections.NewTranscript(s.pool)
	var once map[string][][]any
	s.replay(t, id, n, func(m jetstream.Msg) { require.NoError(t, w.Handle(ctx, m)) })
	once = s.snapshot(t, id)
	s.replay(t, id, n, func(m jetstream.Msg) {
		require.NoError(t, w.Handle(ctx, m))
		require.NoError(t, w.Handle(ctx, m))
	})
	assert.Equal(t, once, s.snapshot(t, id))
	assert.Equal(t, 3, s.count(t, "agent_messages", id))
	assert.Equal(t, 4, s.count(t, "tool_calls", id))
	assert.Equal(t, 1, s.count(t, "subagent_sessions", id))
	assert.Equal(t, 9, s.count(t, "session_log_chunks", id))
}

// TestProjectingOutOfOrderGivesTheSameTranscript projects a session's raw
// events in other orders than the stream's, as a worker killed with events
// in flight makes happen (they come back after its successor went on): a
// result before its call, a subagent before the Task call that spawned it,
// the session's end before both. Each order ends in the rows stream order
// gives.
func TestProjectingOutOfOrderGivesTheSameTranscript(t *testing.T) {
	s := start(t, false)
	id := uuid.New()
	n := s.session(t, id)
	ctx := context.Background()
	w := projections.NewTranscript(s.pool)
	var msgs []jetstream.Msg
	s.replay(t, id, n, func(m jetstream.Msg) { msgs = append(msgs, m) })
	project := func(order []jetstream.Msg) map[string][][]any {
		for _, table := range []string{"agent_messages", "tool_calls", "tool_results", "subagent_sessions", "session_log_chunks"} {
			_, err := s.pool.Exec(ctx, fmt.Sprintf("DELETE FROM %s WHERE session_id = $1", table), id)
			require.NoError(t, err)
		}
		for _, m := range order {
			require.NoError(t, w.Handle(ctx, m))
		}
		return s.snapshot(t, id)
	}
	inOrder := project(msgs)
	require.Len(t, inOrder["tool_calls"], 4)
	require.Len(t, inOrder["subagent_sessions"], 1)

	reversed := slices.Clone(msgs)
	slices.Reverse(reversed)
	assert.Equal(t, inOrder, project(reversed), "projected last to first")
	for seed := range uint64(8) {
		shuffled := slices.Clone(msgs)
		rand.New(rand.NewPCG(seed, 1)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		assert.Equal(t, inOrder, project(shuffled), "projected in the order of seed %d", seed)
	}
}
