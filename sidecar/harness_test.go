package sidecar_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/sidecar"
	"github.com/agentbus/agentbus/sidecar/engine"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// wait is how long a test waits for something that should happen soon; it
// is generous because the race detector on two busy cores is slow.
const wait = 30 * time.Second

// harness runs one sidecar in-process against the shared Redis and reads
// its event stream.
type harness struct {
	t   *testing.T
	rdb *redis.Client
	id  string

	cancel context.CancelFunc
	done   chan struct{}
	end    protocol.SessionEnd
	err    error

	mu     sync.Mutex
	events []protocol.Entry
	last   string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return &harness{t: t, rdb: testenv.Redis(t), id: uuid.NewString(), last: "0"}
}

// scriptConfig is a config of the script engine running scenario with no
// pacing.
func scriptConfig(t *testing.T, scenario string) protocol.Config {
	zero := int64(0)
	return protocol.Config{
		Engine: protocol.EngineScript, Objective: "Keep the service healthy",
		WorkingDirectory: t.TempDir(),
		Script:           protocol.ScriptOptions{Scenario: scenario, PaceMS: &zero},
	}
}

func pace(ms int64) *int64 { return &ms }

// noAPI is an agent API that is not there.
var noAPI = engine.AgentAPI{}

// start runs a sidecar for cfg in a fresh session.
func start(t *testing.T, cfg protocol.Config) *harness {
	h := newHarness(t)
	h.run(cfg, noAPI)
	return h
}

// run starts the sidecar of h's session; the test's end stops it.
func (h *harness) run(cfg protocol.Config, api engine.AgentAPI) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	h.cancel, h.done = cancel, done
	go func() {
		defer close(done)
		h.end, h.err = sidecar.Run(ctx, sidecar.Options{
			SessionID: h.id, Config: cfg, Redis: h.rdb, API: api, CommandBlock: 100 * time.Millisecond,
		})
	}()
	h.t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(wait):
			h.t.Errorf("sidecar of session %s did not end", h.id)
		}
	})
}

// send appends a command and returns its command_id.
func (h *harness) send(typ string, data any) string {
	h.t.Helper()
	id := uuid.NewString()
	values, err := protocol.CommandValues(typ, id, data, time.Now())
	require.NoError(h.t, err)
	require.NoError(h.t, h.rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: protocol.CommandsKey(h.id), Values: values}).Err())
	return id
}

// sendRaw appends a command entry with exactly these fields.
func (h *harness) sendRaw(fields ...any) {
	h.t.Helper()
	require.NoError(h.t, h.rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: protocol.CommandsKey(h.id), Values: fields}).Err())
}

// poll reads the events written since the last poll.
func (h *harness) poll() []protocol.Entry {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	msgs, err := h.rdb.XRange(context.Background(), protocol.EventsKey(h.id), "("+h.last, "+").Result()
	if h.last == "0" {
		msgs, err = h.rdb.XRange(context.Background(), protocol.EventsKey(h.id), "-", "+").Result()
	}
	require.NoError(h.t, err)
	for _, m := range msgs {
		e, err := protocol.ParseEntry(m.ID, m.Values)
		require.NoError(h.t, err, "event %s", m.ID)
		h.events = append(h.events, e)
		h.last = m.ID
	}
	return append([]protocol.Entry(nil), h.events...)
}

// waitFor returns the first event (of all so far and to come) that matches.
func (h *harness) waitFor(what string, match func(protocol.Entry) bool) protocol.Entry {
	h.t.Helper()
	deadline := time.Now().Add(wait)
	for {
		for _, e := range h.poll() {
			if match(e) {
				return e
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("no %s within %s; events: %s", what, wait, h.dump())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (h *harness) waitType(typ string) protocol.Entry {
	h.t.Helper()
	return h.waitFor(typ, func(e protocol.Entry) bool { return e.Type == typ })
}

// waitAck returns the ack of type typ that echoes commandID.
func (h *harness) waitAck(typ, commandID string) protocol.Entry {
	h.t.Helper()
	return h.waitFor(typ+" of "+commandID, func(e protocol.Entry) bool {
		return e.Type == typ && dataField(h.t, e, "command_id") == commandID
	})
}

// waitTool returns the tool_use block of the first call of tool.
func (h *harness) waitTool(tool string) protocol.AssistantMessage {
	h.t.Helper()
	e := h.waitFor("tool_use of "+tool, func(e protocol.Entry) bool {
		return e.Type == protocol.EventAssistantMessage && dataField(h.t, e, "tool_name") == tool
	})
	return decode[protocol.AssistantMessage](h.t, e)
}

// waitResult returns the tool_result of a call.
func (h *harness) waitResult(toolUseID string) protocol.ToolResult {
	h.t.Helper()
	e := h.waitFor("tool_result of "+toolUseID, func(e protocol.Entry) bool {
		return e.Type == protocol.EventToolResult && dataField(h.t, e, "tool_use_id") == toolUseID
	})
	return decode[protocol.ToolResult](h.t, e)
}

// waitEnd waits for Run to return and for its session_end.
func (h *harness) waitEnd() protocol.SessionEnd {
	h.t.Helper()
	select {
	case <-h.done:
	case <-time.After(wait):
		h.t.Fatalf("session did not end within %s; events: %s", wait, h.dump())
	}
	require.NoError(h.t, h.err)
	events := h.poll()
	require.NotEmpty(h.t, events)
	last := events[len(events)-1]
	require.Equal(h.t, protocol.EventSessionEnd, last.Type, "session_end is the last event; events: %s", h.dump())
	end := decode[protocol.SessionEnd](h.t, last)
	require.Equal(h.t, h.end, end)
	return end
}

// ofType returns the events of the given types seen so far, in order.
func (h *harness) ofType(types ...string) []protocol.Entry {
	var out []protocol.Entry
	for _, e := range h.poll() {
		for _, typ := range types {
			if e.Type == typ {
				out = append(out, e)
			}
		}
	}
	return out
}

// index returns the position of event e among all events.
func (h *harness) index(e protocol.Entry) int {
	for i, x := range h.poll() {
		if x.ID == e.ID {
			return i
		}
	}
	return -1
}

func (h *harness) dump() string {
	var b strings.Builder
	for _, e := range h.events {
		fmt.Fprintf(&b, "\n  %s %s %s", e.ID, e.Type, e.Data)
	}
	return b.String()
}

// decode reads an event's data strictly: a field the struct does not know
// fails the test, so the Go types and the written data cannot drift apart.
func decode[T any](t testing.TB, e protocol.Entry) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(e.Data))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&v), "%s data %s", e.Type, e.Data)
	return v
}

func dataField(t testing.TB, e protocol.Entry, field string) string {
	var m map[string]any
	require.NoError(t, json.Unmarshal(e.Data, &m))
	s, _ := m[field].(string)
	return s
}
