package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/api"
)

// TestWebSocketMultiplexesSessions drives three script-engine sessions
// (and a fourth to force-cancel) through `up` and its real runtime over
// one WebSocket connection.
func TestWebSocketMultiplexesSessions(t *testing.T) {
	u := startUpWithRuntime(t)
	dir := func() string { return filepath.Join(u.workspace, u.owner, uuid.NewString()[:8]) }

	t.Run("an upgrade without a valid token is refused as the API refuses it", func(t *testing.T) {
		resp, err := http.Get(u.base + "/api/agents/ws")
		require.NoError(t, err)
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
		assert.Contains(t, string(raw), `"kind":"unauthorized"`)
	})

	w := dialWS(t, u.base, u.token)
	start := func(ref, objective string, extra map[string]any) string {
		body := map[string]any{"workingDirectory": dir(), "objective": objective, "budgetCapUsd": 5}
		for k, v := range extra {
			body[k] = v
		}
		m := w.mustCall(ref, map[string]any{"type": "start", "data": body})
		require.Equal(t, "state", m.Type, m.Raw)
		require.NotEmpty(t, m.SessionID)
		assert.Equal(t, "Queued", m.field("status"))
		return m.SessionID
	}
	question := start("start-q", "Pick a database [scenario:question]", nil)
	permission := start("start-p", "Clean up [scenario:permission]", map[string]any{"toolApproval": map[string]any{"mode": "All"}})
	long := start("start-l", "Run the suite [scenario:long]", nil)

	t.Run("a question is answered and the agent goes on with the answer", func(t *testing.T) {
		q := w.waitFor("the question", of("question", question, "Which database should the service use?", "PostgreSQL", "SQLite"))
		assert.NotZero(t, q.EventID)
		w.mustCall("answer", map[string]any{"type": "answer", "sessionId": question, "data": map[string]any{"answer": "PostgreSQL"}})
		w.waitFor("the text written with the answer", of("text", question, "Going with PostgreSQL."))
		w.waitFor("the tool call that uses it", of("tool_use", question, `"toolName":"Edit"`, "database: PostgreSQL"))
		w.waitFor("the result", of("result", question))
	})

	t.Run("an input is acknowledged once the agent received it", func(t *testing.T) {
		w.waitFor("the question session's review", of("result", question))
		m := w.mustCall("input-1", map[string]any{"type": "input", "sessionId": question,
			"data": map[string]any{"content": "Then write the migration", "priority": "Queued"}})
		assert.Equal(t, "InputSent", m.field("status"))
		ack := w.waitFor("input_ack", func(m doorMsg) bool { return m.Type == "input_ack" && m.ReplyTo == "input-1" })
		assert.Equal(t, question, ack.SessionID)
		assert.NotEmpty(t, ack.field("messageId"))
		assert.NotZero(t, ack.EventID)
	})

	t.Run("tool uses wait for approval: one approved, one rejected with a reason", func(t *testing.T) {
		first := w.waitFor("the first approval request", of("approval_request", permission, `"toolName":"Bash"`, "rm -rf build/"))
		w.mustCall("approve", map[string]any{"type": "approve", "sessionId": permission,
			"data": map[string]any{"requestId": first.field("requestId")}})
		w.waitFor("the approved tool's result", of("tool_result", permission, "removed build/"))
		w.waitFor("the second approval request", of("approval_request", permission, `"toolName":"Write"`))
		// Without a requestId the oldest pending request is decided.
		w.mustCall("reject", map[string]any{"type": "reject", "sessionId": permission, "data": map[string]any{"reason": "Not that file"}})
		denied := w.waitFor("the rejected tool's result", of("tool_result", permission, `"toolName":"Write"`))
		assert.Contains(t, denied.Raw, `"isError":true`)
		assert.Contains(t, denied.Raw, "Not that file")
	})

	t.Run("pause and resume go through their two phases", func(t *testing.T) {
		w.waitFor("the long tool call", of("tool_use", long, "make integration-test"))
		m := w.mustCall("pause", map[string]any{"type": "pause", "sessionId": long})
		assert.Equal(t, "Pausing", m.field("status"))
		w.waitFor("Paused", of("state", long, `"status":"Paused"`))
		m = w.mustCall("resume", map[string]any{"type": "resume", "sessionId": long})
		assert.Equal(t, "Resuming", m.field("status"))
		w.waitFor("Running again", of("state", long, `"event":"session_resumed"`))
	})

	t.Run("an input not delivered in time is reported, and a refused command is the API's error", func(t *testing.T) {
		// Queued waits for the running turn, whose tool runs a minute.
		w.mustCall("input-late", map[string]any{"type": "input", "sessionId": long,
			"data": map[string]any{"content": "After the suite, summarise", "priority": "Queued", "timeoutMs": 300}})
		to := w.waitFor("input_timeout", func(m doorMsg) bool { return m.Type == "input_timeout" && m.ReplyTo == "input-late" })
		assert.Equal(t, long, to.SessionID)

		m := w.call("resume-again", map[string]any{"type": "resume", "sessionId": long})
		require.Equal(t, "error", m.Type, m.Raw)
		var overHTTP api.Problem
		code := u.Call(http.MethodPost, "/api/agents/sessions/"+long+"/resume", nil, &overHTTP)
		require.Equal(t, http.StatusConflict, code)
		// The session may move on between the two calls (its turn ends and
		// the queued message starts the next): the messages are compared
		// with the status each call saw.
		assert.Equal(t, overHTTP.Kind, m.field("kind"))
		require.NotEmpty(t, m.field("currentStatus"))
		assert.Equal(t, strings.ReplaceAll(overHTTP.Detail, overHTTP.CurrentStatus, m.field("currentStatus")), m.field("message"))
	})

	t.Run("a graceful cancel stops the agent", func(t *testing.T) {
		m := w.mustCall("cancel", map[string]any{"type": "cancel", "sessionId": long})
		assert.Equal(t, "Cancelling", m.field("status"))
		w.waitFor("Cancelled", of("state", long, `"status":"Cancelled"`))
		assert.False(t, stopCommandForced(t, u, long), "a graceful cancel lets the agent stop")
	})

	t.Run("a force cancel abandons the agent at once", func(t *testing.T) {
		forced := start("start-f", "Run the suite [scenario:long]", nil)
		w.waitFor("the long tool call", of("tool_use", forced, "make integration-test"))
		pid := u.sidecarPID(forced)
		m := w.mustCall("force", map[string]any{"type": "cancel", "sessionId": forced, "data": map[string]any{"force": true}})
		assert.Equal(t, "Cancelling", m.field("status"))
		w.waitFor("Cancelled", of("state", forced, `"status":"Cancelled"`))
		assert.True(t, stopCommandForced(t, u, forced), "the sidecar was told to stop at once")
		u.waitGone(pid)
	})

	t.Run("each session's messages came once, in feed order", func(t *testing.T) {
		seen := map[uint64]bool{}
		last := map[string]uint64{}
		for _, m := range w.all() {
			if m.EventID == 0 {
				continue
			}
			assert.False(t, seen[m.EventID], "event %d came twice: %s", m.EventID, m.Raw)
			seen[m.EventID] = true
			assert.Greater(t, m.EventID, last[m.SessionID], "out of order: %s", m.Raw)
			last[m.SessionID] = m.EventID
		}
	})
}

// stopCommandForced reads the stop command the session's sidecar got.
func stopCommandForced(t *testing.T, u *upUnderTest, id string) bool {
	t.Helper()
	var forced bool
	require.Eventually(t, func() bool {
		entries, err := u.redis.XRange(context.Background(), "agent:session:{"+id+"}:commands", "-", "+").Result()
		require.NoError(t, err)
		for _, e := range entries {
			if e.Values["type"] == "stop" {
				var d struct {
					Force bool `json:"force"`
				}
				require.NoError(t, json.Unmarshal([]byte(fmt.Sprint(e.Values["data"])), &d))
				forced = d.Force
				return true
			}
		}
		return false
	}, 2*wait, 50*time.Millisecond, "no stop command reached session %s", id)
	return forced
}

// TestWebSocketReconnectMissesNothingAndRepeatsNothing follows a session
// on one connection, drops it mid-stream, resumes on another from the
// last event id received, and compares both with a third that read the
// whole feed.
func TestWebSocketReconnectMissesNothingAndRepeatsNothing(t *testing.T) {
	u := startUpWithRuntime(t)
	first := dialWS(t, u.base, u.token)
	m := first.mustCall("start", map[string]any{"type": "start", "data": map[string]any{
		"workingDirectory": "reconnect", "objective": "Say hello", "budgetCapUsd": 5}})
	id := m.SessionID
	first.waitFor("the first tool call", of("tool_use", id))
	require.NoError(t, first.c.CloseNow())
	first.waitFor("the end of the first connection", func(doorMsg) bool {
		first.mu.Lock()
		defer first.mu.Unlock()
		return first.closed != nil
	})
	before := feedOf(first.all(), id)
	require.NotEmpty(t, before)
	lastID := before[len(before)-1].EventID

	second := dialWS(t, u.base, u.token)
	second.mustCall("resubscribe", map[string]any{"type": "subscribe", "sessionId": id, "data": map[string]any{"lastEventId": lastID}})
	end := second.waitFor("the output ready for review", of("result", id))

	whole := dialWS(t, u.base, u.token)
	whole.mustCall("subscribe", map[string]any{"type": "subscribe", "sessionId": id})
	whole.waitFor("the same last item", func(m doorMsg) bool { return m.EventID == end.EventID })

	var joined []uint64
	for _, m := range append(before, feedOf(second.all(), id)...) {
		if m.EventID <= end.EventID {
			joined = append(joined, m.EventID)
		}
	}
	var all []uint64
	for _, m := range feedOf(whole.all(), id) {
		if m.EventID <= end.EventID {
			all = append(all, m.EventID)
		}
	}
	assert.Equal(t, all, joined, "the two connections together carried the whole feed, each item once")
	assert.Less(t, len(before), len(all), "the first connection was dropped mid-stream")
}

// feedOf is the feed items of session id among msgs.
func feedOf(msgs []doorMsg, id string) []doorMsg {
	var out []doorMsg
	for _, m := range msgs {
		if m.SessionID == id && m.EventID != 0 {
			out = append(out, m)
		}
	}
	return out
}

// TestWebSocketRefusesWhatItCannotTake sends invalid, oversized and too
// many messages and too many sessions, and checks the keep-alive: each
// refusal is an error message and the connection stays.
func TestWebSocketRefusesWhatItCannotTake(t *testing.T) {
	t.Setenv("AGENTBUS_WS_PING_INTERVAL", "300ms")
	u := startUpWithRuntime(t)
	w := dialWS(t, u.base, u.token)
	stillOpen := func(ref string) {
		t.Helper()
		m := w.call(ref, map[string]any{"type": "subscribe", "sessionId": uuid.NewString()})
		require.Equal(t, "error", m.Type)
		assert.Equal(t, "not_found", m.field("kind"), "the connection still answers: %s", m.Raw)
	}

	t.Run("an invalid message gets an error naming the problem", func(t *testing.T) {
		w.sendRaw([]byte("this is not JSON"))
		m := w.waitFor("the error", of("error", "", "not a JSON object"))
		assert.Equal(t, "validation", m.field("kind"))
		m = w.call("bogus", map[string]any{"type": "bogus"})
		assert.Equal(t, "error", m.Type)
		assert.Contains(t, m.field("message"), `unknown message type "bogus"`)
		m = w.call("no-id", map[string]any{"type": "pause", "sessionId": "nope"})
		assert.Equal(t, "sessionId", m.field("field"))
		m = w.call("bad-start", map[string]any{"type": "start", "data": map[string]any{"objective": ""}})
		require.Equal(t, "error", m.Type)
		var overHTTP api.Problem
		require.Equal(t, http.StatusUnprocessableEntity, u.Call(http.MethodPost, "/api/agents/sessions", map[string]any{"objective": ""}, &overHTTP))
		assert.Equal(t, overHTTP.Kind, m.field("kind"))
		assert.Contains(t, m.field("message"), overHTTP.Detail, "the API's own message")
		stillOpen("after-invalid")
	})

	t.Run("an oversized message is refused whole, not cut", func(t *testing.T) {
		big := map[string]any{"type": "input", "sessionId": uuid.NewString(), "id": "big",
			"data": map[string]any{"content": strings.Repeat("x", 70<<10)}}
		w.send(big)
		m := w.waitFor("the error", of("error", "", "more than the 65536"))
		assert.Equal(t, "validation", m.field("kind"))
		stillOpen("after-big")
	})

	t.Run("the eleventh session on a connection is refused", func(t *testing.T) {
		// Another user with a pool of one: the sessions beyond it wait
		// Queued and need no sidecar.
		owner := uuid.NewString()
		token, err := api.NewToken(runtimeSecret, owner, time.Hour)
		require.NoError(t, err)
		other := *u.Client
		other.Token = token
		other.Must(http.MethodPut, "/api/agents/pool", map[string]any{"maxConcurrentSessions": 1}, nil)
		c := dialWS(t, u.base, token)
		var ids []string
		for i := range 10 {
			m := c.mustCall(fmt.Sprint("s", i), map[string]any{"type": "start", "data": map[string]any{
				"workingDirectory": "limit", "objective": "Run the suite [scenario:long]", "budgetCapUsd": 1}})
			ids = append(ids, m.SessionID)
		}
		m := c.call("s10", map[string]any{"type": "start", "data": map[string]any{
			"workingDirectory": "limit", "objective": "One too many", "budgetCapUsd": 1}})
		require.Equal(t, "error", m.Type, m.Raw)
		assert.Equal(t, "conflict", m.field("kind"))
		assert.Contains(t, m.field("message"), "maximum of sessions")
		var list struct {
			Total int `json:"total"`
		}
		other.Must(http.MethodGet, "/api/agents/sessions", nil, &list)
		assert.Equal(t, 10, list.Total, "the refused start created no session")

		// Leaving one makes room for another.
		c.mustCall("leave", map[string]any{"type": "unsubscribe", "sessionId": ids[9]})
		c.mustCall("rejoin", map[string]any{"type": "subscribe", "sessionId": ids[9]})
		// The Queued ones first: cancelling the running one frees its slot.
		for i := len(ids) - 1; i >= 0; i-- {
			id := ids[i]
			c.mustCall(fmt.Sprint("cancel", i), map[string]any{"type": "cancel", "sessionId": id, "data": map[string]any{"force": true}})
		}
	})

	t.Run("too many messages at once are answered rate_limited", func(t *testing.T) {
		c := dialWS(t, u.base, u.token)
		for i := range 100 {
			c.send(map[string]any{"type": "bogus", "id": fmt.Sprint("flood", i)})
		}
		m := c.waitFor("rate_limited", func(m doorMsg) bool { return m.Type == "error" && m.field("kind") == "rate_limited" })
		assert.NotEmpty(t, m.field("retryAfterSeconds"))
		limited := 0
		for _, m := range c.all() {
			if m.field("kind") == "rate_limited" {
				limited++
			}
		}
		assert.Greater(t, limited, 0)
		assert.Less(t, limited, 100, "the burst went through before the limit")
		time.Sleep(2 * time.Second)
		m = c.call("after-flood", map[string]any{"type": "bogus"})
		assert.Contains(t, m.field("message"), "unknown message type", "the connection is usable again: %s", m.Raw)
	})

	t.Run("pings keep a reading client connected and close a silent one", func(t *testing.T) {
		time.Sleep(1500 * time.Millisecond) // five ping intervals
		stillOpen("after-pings")

		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		silent, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(u.base, "http")+"/api/agents/ws",
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + u.token}}})
		require.NoError(t, err)
		defer silent.CloseNow()
		time.Sleep(1500 * time.Millisecond) // it reads nothing, so answers no ping
		_, _, err = silent.Read(ctx)
		require.Error(t, err)
		assert.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(err), "closed for want of a pong: %v", err)
	})
}
