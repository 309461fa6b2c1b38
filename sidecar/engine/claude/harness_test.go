package claude_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	"github.com/agentbus/agentbus/sidecar/engine/claude"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// wait is how long a test waits for something that should happen soon; it
// is generous because the race detector and several CLIs share two cores.
const wait = 60 * time.Second

// cliBinary returns the installed Claude Code CLI, or skips the test when
// it is not installed, saying why.
func cliBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv(claude.EnvBinary); b != "" {
		return b
	}
	root := moduleRoot(t)
	bin := filepath.Join(root, claude.DefaultBinary)
	if _, err := os.Stat(bin); err != nil {
		why := "`make deps` installs it with npm"
		if log, err := os.ReadFile(filepath.Join(root, ".tools", "claude-install.log")); err == nil {
			why = "its install by `make deps` failed: " + installError(string(log))
		}
		t.Skipf("the Claude Code CLI %s is not installed at %s: %s", claude.Version, bin, why)
	}
	out, err := exec.Command(bin, "--version").Output()
	require.NoError(t, err, "%s --version", bin)
	require.True(t, strings.HasPrefix(string(out), claude.Version),
		"%s is version %q, not the pinned %s: run `make deps`", bin, strings.TrimSpace(string(out)), claude.Version)
	return bin
}

// installError picks what npm said went wrong out of its log: its error
// code and message, else the log's last line.
func installError(log string) string {
	var picked []string
	lines := strings.Split(strings.TrimSpace(log), "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "npm error code ") || (strings.HasPrefix(l, "npm error") && strings.Contains(l, "Error")) {
			picked = append(picked, strings.TrimSpace(strings.TrimPrefix(l, "npm error")))
		}
		if len(picked) == 2 {
			break
		}
	}
	if len(picked) == 0 {
		return lines[len(lines)-1]
	}
	return strings.Join(picked, ": ")
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test")
		dir = parent
	}
}

// world is what the sessions of a test share: the scripted model, the
// CLI's home directory and the working directory.
type world struct {
	t      *testing.T
	model  *fakeModel
	home   string
	work   string
	engine *claude.Engine
}

func newWorld(t *testing.T, script ...reply) *world {
	t.Helper()
	bin := cliBinary(t)
	w := &world{t: t, model: newFakeModel(t, script...), home: t.TempDir(), work: t.TempDir()}
	w.engine = &claude.Engine{
		Binary: bin,
		Env: []string{
			"HOME=" + w.home,
			"ANTHROPIC_BASE_URL=" + w.model.URL(),
			"ANTHROPIC_API_KEY=sk-ant-test-key",
			"DISABLE_TELEMETRY=1",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
			"DISABLE_AUTOUPDATER=1",
		},
	}
	return w
}

// config is a claude session config working in the world's directory.
func (w *world) config(objective string) protocol.Config {
	return protocol.Config{
		Engine: protocol.EngineClaude, Model: "claude-sonnet-4-5", Objective: objective,
		SystemPrompt: "You are the agent of the agentbus engine tests.", WorkingDirectory: w.work,
	}
}

// harness runs one sidecar with the claude engine in-process against the
// shared Redis and reads its event stream.
type harness struct {
	t   *testing.T
	rdb *redis.Client
	id  string

	done chan struct{}
	end  protocol.SessionEnd
	err  error

	mu     sync.Mutex
	events []protocol.Entry
	last   string
}

// start runs a sidecar for cfg in a fresh session; the test's end stops it.
func (w *world) start(cfg protocol.Config) *harness {
	h := &harness{t: w.t, rdb: testenv.Redis(w.t), id: uuid.NewString(), last: "0", done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(h.done)
		h.end, h.err = sidecar.Run(ctx, sidecar.Options{
			SessionID: h.id, Config: cfg, Redis: h.rdb, CommandBlock: 100 * time.Millisecond,
			Engines: engine.Registry{claude.Name: w.engine},
		})
	}()
	w.t.Cleanup(func() {
		cancel()
		select {
		case <-h.done:
		case <-time.After(wait):
			w.t.Errorf("sidecar of session %s did not end", h.id)
		}
	})
	return h
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

// poll reads the events written since the last poll.
func (h *harness) poll() []protocol.Entry {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	start := "(" + h.last
	if h.last == "0" {
		start = "-"
	}
	msgs, err := h.rdb.XRange(context.Background(), protocol.EventsKey(h.id), start, "+").Result()
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

// waitTool returns the tool_use block of the call toolUseID.
func (h *harness) waitTool(toolUseID string) protocol.AssistantMessage {
	h.t.Helper()
	e := h.waitFor("tool_use "+toolUseID, func(e protocol.Entry) bool {
		return e.Type == protocol.EventAssistantMessage && field(h.t, e, "tool_use_id") == toolUseID
	})
	return decode[protocol.AssistantMessage](h.t, e)
}

// waitResult returns the tool_result of a call.
func (h *harness) waitResult(toolUseID string) protocol.ToolResult {
	h.t.Helper()
	e := h.waitFor("tool_result of "+toolUseID, func(e protocol.Entry) bool {
		return e.Type == protocol.EventToolResult && field(h.t, e, "tool_use_id") == toolUseID
	})
	return decode[protocol.ToolResult](h.t, e)
}

// waitPermission returns the permission_request for a call.
func (h *harness) waitPermission(toolUseID string) protocol.PermissionRequest {
	h.t.Helper()
	e := h.waitFor("permission_request of "+toolUseID, func(e protocol.Entry) bool {
		return e.Type == protocol.EventPermissionRequest && field(h.t, e, "tool_use_id") == toolUseID
	})
	return decode[protocol.PermissionRequest](h.t, e)
}

// waitEnd waits for Run to return and checks that its session_end is the
// last event, and that every event has its documented shape.
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
	for _, e := range events {
		strictDecode(h.t, e)
	}
	end := decode[protocol.SessionEnd](h.t, last)
	require.Equal(h.t, h.end, end)
	return end
}

// ofType returns the events of the given type seen so far, in order.
func (h *harness) ofType(typ string) []protocol.Entry {
	var out []protocol.Entry
	for _, e := range h.poll() {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func (h *harness) started() protocol.SessionStarted {
	h.t.Helper()
	return decode[protocol.SessionStarted](h.t, h.waitType(protocol.EventSessionStarted))
}

func (h *harness) dump() string {
	var b strings.Builder
	for _, e := range h.events {
		fmt.Fprintf(&b, "\n  %s %s %s", e.ID, e.Type, e.Data)
	}
	return b.String()
}

// decode reads an event's data strictly: a field the struct does not know
// fails the test.
func decode[T any](t testing.TB, e protocol.Entry) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(e.Data))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&v), "%s data %s", e.Type, e.Data)
	return v
}

// strictDecode checks the data of the event types a claude session writes.
func strictDecode(t testing.TB, e protocol.Entry) {
	t.Helper()
	switch e.Type {
	case protocol.EventSessionStarted:
		decode[protocol.SessionStarted](t, e)
	case protocol.EventAssistantMessage:
		decode[protocol.AssistantMessage](t, e)
	case protocol.EventTextDelta:
		decode[protocol.TextDelta](t, e)
	case protocol.EventToolResult:
		decode[protocol.ToolResult](t, e)
	case protocol.EventSubagentMessage:
		decode[protocol.SubagentMessage](t, e)
	case protocol.EventUsageUpdate:
		decode[protocol.UsageUpdate](t, e)
	case protocol.EventTurnCompleted:
		decode[protocol.TurnCompleted](t, e)
	case protocol.EventPermissionRequest:
		decode[protocol.PermissionRequest](t, e)
	case protocol.EventMessageDelivered:
		decode[protocol.MessageDelivered](t, e)
	case protocol.EventSessionEnd:
		decode[protocol.SessionEnd](t, e)
	case protocol.EventInterruptAck:
		decode[protocol.InterruptAck](t, e)
	case protocol.EventStopAck:
		decode[protocol.StopAck](t, e)
	case protocol.EventContextNearingLimit:
		decode[protocol.ContextNearingLimit](t, e)
	case protocol.EventError:
		// A client's early answer_question (see harness.answer).
		if e := decode[protocol.ErrorEvent](t, e); e.Code != "not_pending" {
			t.Errorf("error event %+v", e)
		}
	default:
		t.Errorf("unexpected event %s %s", e.Type, e.Data)
	}
}

func field(t testing.TB, e protocol.Entry, name string) string {
	var m map[string]any
	require.NoError(t, json.Unmarshal(e.Data, &m))
	s, _ := m[name].(string)
	return s
}

// listPrice is what the CLI charges for claude-sonnet-4-5 at list prices
// (per million tokens: input 3, output 15, cache read 0.30, cache write
// 3.75), to check that a usage_update's cost is its own turn's.
func listPrice(u protocol.UsageUpdate) float64 {
	return (3*float64(u.InputTokens) + 15*float64(u.OutputTokens) +
		0.3*float64(u.CacheReadTokens) + 3.75*float64(u.CacheWriteTokens)) / 1e6
}
