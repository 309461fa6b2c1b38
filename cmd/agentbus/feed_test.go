package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbus/agentbus/internal/uptest"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sseEvent is one event read from a live stream.
type sseEvent struct {
	ID   uint64
	Name string
	Data map[string]any
}

// sessionID is the session the event is about: a feed item names it, a
// domain event of the session or its queue has it as aggregate id.
func (e sseEvent) sessionID() string {
	if s, ok := e.Data["sessionId"].(string); ok {
		return s
	}
	s, _ := e.Data["aggregateId"].(string)
	return s
}

// label names the event for comparing sequences: the domain event's type,
// or the feed item's kind.
func (e sseEvent) label() string {
	if e.Name == "event" {
		t, _ := e.Data["type"].(string)
		return t
	}
	return e.Name
}

// sseStream is an open live stream; its events come on events, without
// pings.
type sseStream struct {
	t      testing.TB
	events chan sseEvent
}

// openStream opens the stream at path, resuming after lastEventID when
// it is not empty.
func (u *upUnderTest) openStream(path, lastEventID string) *sseStream {
	u.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	u.t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.base+path, nil)
	require.NoError(u.t, err)
	req.Header.Set("Authorization", "Bearer "+u.token)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(u.t, err)
	require.Equal(u.t, http.StatusOK, resp.StatusCode)
	s := &sseStream{t: u.t, events: make(chan sseEvent, 1024)}
	opened := make(chan struct{})
	go func() {
		defer resp.Body.Close()
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseEvent
		var data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				ev.ID, _ = strconv.ParseUint(strings.TrimPrefix(line, "id: "), 10, 64)
			case strings.HasPrefix(line, "event: "):
				ev.Name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = strings.TrimPrefix(line, "data: ")
			case line == "":
				if ev.Name == "ping" {
					select {
					case <-opened:
					default:
						close(opened)
					}
				} else if data != "" {
					_ = json.Unmarshal([]byte(data), &ev.Data)
					s.events <- ev
				}
				ev, data = sseEvent{}, ""
			}
		}
	}()
	select {
	case <-opened:
	case <-time.After(wait):
		u.t.Fatalf("the stream %s did not open", path)
	}
	return s
}

// next returns the next event of session id.
func (s *sseStream) next(id string) sseEvent {
	s.t.Helper()
	for {
		select {
		case ev, ok := <-s.events:
			require.True(s.t, ok, "the stream ended")
			require.NotEqual(s.t, "reconnect", ev.Name, "the stream asked to reconnect: %v", ev.Data)
			if ev.sessionID() == id {
				return ev
			}
		case <-time.After(2 * wait):
			s.t.Fatalf("no event of session %s", id)
		}
	}
}

// until returns the events of session id before the first one stop
// matches, and that one.
func (s *sseStream) until(id string, stop func(sseEvent) bool) ([]sseEvent, sseEvent) {
	s.t.Helper()
	var got []sseEvent
	for {
		ev := s.next(id)
		if stop(ev) {
			return got, ev
		}
		got = append(got, ev)
	}
}

// queueEvent matches the queue event typ of message messageID.
func queueEvent(typ, messageID string) func(sseEvent) bool {
	return func(ev sseEvent) bool {
		data, _ := ev.Data["data"].(map[string]any)
		return ev.label() == typ && data["messageId"] == messageID
	}
}

// TestTheLiveFeedCarriesASessionInOrderAndResumesExactly follows a real
// script-engine session from before it starts: the feed must carry what a
// UI shows (status, the assistant's text, a tool call and its result, a
// queue change, metrics) in order and once each, and a reconnect from any
// id must give exactly the rest.
func TestTheLiveFeedCarriesASessionInOrderAndResumesExactly(t *testing.T) {
	u := startUpWithRuntime(t)
	live := u.openStream("/api/agents/stream", "")

	id := u.start(map[string]any{"workingDirectory": filepath.Join(u.workspace, u.owner, uuid.NewString()[:8]), "objective": "Say hello"})
	u.waitReview(id)
	turns := u.Session(id).Metrics.TurnCount
	followUp := u.Enqueue(id, "Now say goodbye", "Queued")
	u.WaitDelivered(id, followUp)
	u.WaitFor(id, "Idle awaiting review after the follow-up's turn", func(s uptest.Session) bool {
		return s.Status == "Idle" && s.HasPendingReview && s.Metrics.TurnCount > turns
	})
	// The marker's enqueue comes after everything the follow-up caused
	// that the session's state already shows; it bounds the sequence.
	isMarker := queueEvent("message_enqueued", u.Enqueue(id, "marker", "Queued"))
	all, marker := live.until(id, isMarker)

	// The order a UI needs, each exactly once.
	labels := make([]string, len(all))
	seen := map[uint64]bool{}
	items := map[string]bool{}
	for i, ev := range all {
		labels[i] = ev.label()
		assert.False(t, seen[ev.ID], "event id %d came twice", ev.ID)
		seen[ev.ID] = true
		if item, ok := ev.Data["itemId"].(string); ok {
			assert.False(t, items[item], "activity item %s came twice", item)
			items[item] = true
		}
		if i > 0 {
			assert.Greater(t, ev.ID, all[i-1].ID, "ids grow")
		}
	}
	index := func(what string, match func(sseEvent) bool) int {
		t.Helper()
		found := -1
		for i, ev := range all {
			if match(ev) {
				assert.Equal(t, -1, found, "%s came twice: %v", what, labels)
				found = i
			}
		}
		require.NotEqual(t, -1, found, "no %s in %v", what, labels)
		return found
	}
	is := func(label string) func(sseEvent) bool { return func(ev sseEvent) bool { return ev.label() == label } }
	started := index("agent_session_started", is("agent_session_started"))
	text := index("the assistant's first text", func(ev sseEvent) bool {
		s, _ := ev.Data["text"].(string)
		return ev.Name == "assistant_text" && strings.HasPrefix(s, "I'll start by looking at the project")
	})
	call := index("the Bash call", func(ev sseEvent) bool {
		in, _ := ev.Data["input"].(map[string]any)
		return ev.Name == "tool_call" && ev.Data["toolName"] == "Bash" && in["command"] == "go test ./..."
	})
	result := index("the Bash result", func(ev sseEvent) bool {
		return ev.Name == "tool_result" && ev.Data["toolUseId"] == all[call].Data["toolUseId"]
	})
	metrics := slices.IndexFunc(all, is("session_metrics_updated"))
	require.NotEqual(t, -1, metrics, "no metrics in %v", labels)
	enqueued := index("the follow-up's enqueue", queueEvent("message_enqueued", followUp))
	delivered := index("the follow-up's delivery", queueEvent("message_delivered", followUp))
	ready := 0
	for i, ev := range all {
		if ev.label() == "agent_session_output_ready" {
			ready = i
		}
	}
	assert.Less(t, started, text)
	assert.Less(t, text, metrics)
	assert.Less(t, metrics, call)
	assert.Less(t, call, result)
	assert.Less(t, result, enqueued)
	assert.Less(t, enqueued, delivered)
	assert.Less(t, delivered, ready, "the follow-up's turn ends after its delivery: %v", labels)
	assert.Contains(t, labels, "activity", "other activity (subagent, log) is on the feed")

	// A reconnect from 0, from the middle and from the last event gives
	// exactly the rest, up to the marker, which the stream carries next.
	for _, after := range []int{-1, len(all) / 2, len(all) - 1} {
		lastID := "0"
		if after >= 0 {
			lastID = strconv.FormatUint(all[after].ID, 10)
		}
		resumed := u.openStream("/api/agents/sessions/"+id+"/stream", lastID)
		rest, next := resumed.until(id, isMarker)
		want := all[after+1:]
		require.Len(t, rest, len(want), "after %s", lastID)
		for i := range want {
			assert.Equal(t, want[i].ID, rest[i].ID, "after %s", lastID)
			assert.Equal(t, want[i].Data, rest[i].Data, "after %s", lastID)
		}
		assert.Equal(t, marker.ID, next.ID, "after %s", lastID)
	}

	// Positions the stream cannot honour are refused.
	other := u.start(map[string]any{"workingDirectory": filepath.Join(u.workspace, u.owner, uuid.NewString()[:8]), "objective": "Say hello"})
	for _, lastID := range []string{strconv.FormatUint(marker.ID+1_000_000, 10), strconv.FormatUint(all[text].ID, 10)} {
		req, err := http.NewRequest(http.MethodGet, u.base+"/api/agents/sessions/"+other+"/stream", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+u.token)
		req.Header.Set("Last-Event-ID", lastID)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "Last-Event-ID %s on session %s", lastID, other)
	}
}

// TestASessionsStreamCarriesItsChain follows a script-engine session that
// hands its work off: its own stream carries the chain created around it,
// its handoff and the session that continues it.
func TestASessionsStreamCarriesItsChain(t *testing.T) {
	u := startUpWithRuntime(t)
	id := u.start(map[string]any{"workingDirectory": filepath.Join(u.workspace, u.owner, uuid.NewString()[:8]),
		"objective": "Migrate the legacy package [scenario:handoff]"})
	stream := u.openStream("/api/agents/sessions/"+id+"/stream", "0")

	var chainEvents []string
	var added map[string]any
	for added == nil {
		select {
		case ev, ok := <-stream.events:
			require.True(t, ok, "the stream ended")
			if ev.Name != "event" || ev.Data["aggregate"] != "chain" {
				continue
			}
			chainEvents = append(chainEvents, ev.label())
			if ev.label() == "session_added_to_chain" {
				added, _ = ev.Data["data"].(map[string]any)
			}
		case <-time.After(2 * wait):
			t.Fatalf("the session's stream carried no continuation; chain events: %v", chainEvents)
		}
	}
	assert.Contains(t, chainEvents, "session_handoff_initiated", "the handoff is on the stream: %v", chainEvents)
	next, _ := added["newSessionId"].(string)
	assert.NotEqual(t, id, next, "the session that continues the work")
	assert.NotEmpty(t, next)
}
