package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
	"github.com/agentbus/agentbus/handlers/projections"
	"github.com/agentbus/agentbus/relay"
)

// transcriptOf publishes raw events of session id as the relay does and
// waits until the transcript worker has projected them.
func (st *stack) transcriptOf(t *testing.T, id uuid.UUID, events ...map[string]any) {
	t.Helper()
	_, js := bustest.Connect(t, st.nats)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = projections.NewTranscript(st.db).Run(ctx, js) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	ts := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC).UnixMilli()
	for i, e := range events {
		typ := e["type"].(string)
		data, err := json.Marshal(e["data"])
		require.NoError(t, err)
		entry := fmt.Sprintf("%d-0", i+1)
		body, err := json.Marshal(relay.Event{SessionID: id.String(), EntryID: entry, Type: typ, TS: ts + int64(i)*1000, Data: data})
		require.NoError(t, err)
		msg := &nats.Msg{Subject: bus.SidecarEventSubject(id.String(), typ), Data: body, Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, relay.MsgID(id.String(), entry))
		_, err = js.PublishMsg(ctx, msg)
		require.NoError(t, err)
	}
	require.Eventually(t, bustest.CaughtUp(js, bus.StreamSidecarEvents, projections.Consumer),
		30*time.Second, 20*time.Millisecond, "the transcript is projected")
}

func raw(typ string, data map[string]any) map[string]any {
	return map[string]any{"type": typ, "data": data}
}

func TestTranscriptReads(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{}, true)
	alice, bob := newUser(t), newUser(t)
	s, _ := st.running(t, alice, nil)
	sub := uuid.NewSHA1(uuid.NameSpaceOID, []byte("agent_1"))
	st.transcriptOf(t, s.ID,
		raw("assistant_message", map[string]any{"message_id": "m1", "block_type": "text", "text": "Adding retries.", "model": "claude-sonnet-4-5"}),
		raw("assistant_message", map[string]any{"message_id": "m2", "block_type": "tool_use", "tool_use_id": "toolu_1",
			"tool_name": "Bash", "input": map[string]any{"command": "go test ./..."}}),
		raw("tool_result", map[string]any{"tool_use_id": "toolu_1", "content": "ok  shop/http  1.2s", "is_error": false}),
		raw("assistant_message", map[string]any{"message_id": "m3", "block_type": "tool_use", "tool_use_id": "toolu_task",
			"tool_name": "Task", "input": map[string]any{"prompt": "Check the callers"}}),
		raw("subagent_message", map[string]any{"subagent_id": "agent_1", "parent_tool_use_id": "toolu_task", "message_id": "m4", "text": "Two callers."}),
		raw("assistant_message", map[string]any{"message_id": "m5", "block_type": "tool_use", "tool_use_id": "toolu_2",
			"tool_name": "Grep", "input": map[string]any{"pattern": "Do("}, "subagent_id": "agent_1", "parent_tool_use_id": "toolu_task"}),
		raw("assistant_message", map[string]any{"message_id": "m6", "block_type": "tool_use", "tool_use_id": "toolu_3",
			"tool_name": "Edit", "input": map[string]any{"file_path": "client.go"}}),
	)
	base := "/api/agents/sessions/" + s.ID.String()

	t.Run("messages are the session's own unless a subagent is asked", func(t *testing.T) {
		resp := st.call(t, http.MethodGet, base+"/messages", nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		list := decode[MessageList](t, resp)
		require.Len(t, list.Items, 1)
		assert.Equal(t, 1, list.Total)
		assert.Equal(t, TranscriptMessage{ID: list.Items[0].ID, SessionID: s.ID, Source: "Agent", Content: "Adding retries.",
			ModelID: "claude-sonnet-4-5", Timestamp: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}, list.Items[0])

		resp = st.call(t, http.MethodGet, base+"/messages?subAgentId="+sub.String(), nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		list = decode[MessageList](t, resp)
		require.Len(t, list.Items, 1)
		assert.Equal(t, "SubAgent", list.Items[0].Source)
		assert.Equal(t, &sub, list.Items[0].SubAgentID)
		assert.Equal(t, "Two callers.", list.Items[0].Content)
	})
	t.Run("tool calls carry their results", func(t *testing.T) {
		resp := st.call(t, http.MethodGet, base+"/tool-calls?pageSize=2", nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		list := decode[ToolCallList](t, resp)
		assert.Equal(t, 3, list.Total, "the subagent's call is its own")
		assert.Equal(t, 2, list.PageSize)
		require.Len(t, list.Items, 2)
		bash := list.Items[0]
		assert.Equal(t, "Bash", bash.ToolName)
		assert.JSONEq(t, `{"command":"go test ./..."}`, bash.Input)
		assert.Equal(t, "Success", bash.Status)
		assert.Equal(t, &ToolResult{Content: "ok  shop/http  1.2s"}, bash.Result)
		assert.NotNil(t, bash.CompletedAt)
		assert.Equal(t, "Task", list.Items[1].ToolName)
		assert.Equal(t, "Pending", list.Items[1].Status)
		assert.Nil(t, list.Items[1].Result)

		resp = st.call(t, http.MethodGet, base+"/tool-calls?pageSize=2&page=2", nil, alice.auth)
		list = decode[ToolCallList](t, resp)
		require.Len(t, list.Items, 1)
		assert.Equal(t, "Edit", list.Items[0].ToolName)

		resp = st.call(t, http.MethodGet, base+"/tool-calls?subAgentId="+sub.String(), nil, alice.auth)
		list = decode[ToolCallList](t, resp)
		require.Len(t, list.Items, 1)
		assert.Equal(t, "Grep", list.Items[0].ToolName)
		assert.Equal(t, &sub, list.Items[0].SubAgentID)
	})
	t.Run("the log replays the output in order", func(t *testing.T) {
		resp := st.call(t, http.MethodGet, base+"/logs", nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		log := decode[SessionLog](t, resp)
		var lines []string
		for i, c := range log.Items {
			assert.EqualValues(t, i, c.SequenceNumber)
			lines = append(lines, c.Content)
		}
		assert.Equal(t, []string{"Adding retries.", `[tool] Bash {"command":"go test ./..."}`, "[result] ok  shop/http  1.2s",
			`[tool] Task {"prompt":"Check the callers"}`, `[tool] Edit {"file_path":"client.go"}`}, lines)
	})
	t.Run("activity after a cursor, by subagent", func(t *testing.T) {
		for seq := 1; seq <= 3; seq++ {
			var subID any
			if seq == 2 {
				subID = sub.String()
			}
			_, err := st.db.Exec(context.Background(), `INSERT INTO activity_items (id, session_id, source_seq, raw_type, type, summary, tool_name, subagent_id, occurred_at)
				VALUES ($1, $2, $3, 'assistant_message', 'ToolCallStart', $4, 'Bash', $5, $6)`,
				uuid.New(), s.ID, seq, fmt.Sprintf("Bash step %d", seq), subID, time.Date(2026, 3, 1, 9, 0, seq, 0, time.UTC))
			require.NoError(t, err)
		}
		resp := st.call(t, http.MethodGet, base+"/activity?limit=2", nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		page := decode[ActivityPage](t, resp)
		require.Len(t, page.Items, 2)
		assert.Equal(t, "Bash step 1", page.Items[0].Summary)
		assert.Equal(t, "ToolCallStart", page.Items[0].Type)
		assert.Equal(t, "Bash", page.Items[0].ToolName)
		assert.EqualValues(t, 2, page.NextCursor)

		page = decode[ActivityPage](t, st.call(t, http.MethodGet, fmt.Sprintf("%s/activity?after=%d", base, page.NextCursor), nil, alice.auth))
		require.Len(t, page.Items, 1)
		assert.Equal(t, "Bash step 3", page.Items[0].Summary)

		page = decode[ActivityPage](t, st.call(t, http.MethodGet, base+"/activity?since=2026-03-01T09:00:01Z", nil, alice.auth))
		assert.Len(t, page.Items, 2)

		page = decode[ActivityPage](t, st.call(t, http.MethodGet, base+"/activity?subAgentId="+sub.String(), nil, alice.auth))
		require.Len(t, page.Items, 1)
		assert.Equal(t, &sub, page.Items[0].SubAgentID)
	})
	t.Run("404 for another owner's or an unknown session", func(t *testing.T) {
		for _, p := range []string{"/logs", "/messages", "/tool-calls", "/activity"} {
			resp := st.call(t, http.MethodGet, base+p, nil, bob.auth)
			assert.Equal(t, http.StatusNotFound, resp.Code, p)
			assert.Equal(t, "not_found", resp.problem(t)["kind"], p)
			resp = st.call(t, http.MethodGet, "/api/agents/sessions/"+uuid.NewString()+p, nil, alice.auth)
			assert.Equal(t, http.StatusNotFound, resp.Code, p)
		}
	})
	t.Run("422 for bad paging and filters", func(t *testing.T) {
		for _, q := range []string{
			"/logs?page=0", "/logs?pageSize=101", "/messages?subAgentId=nope", "/tool-calls?pageSize=0",
			"/activity?limit=0", "/activity?limit=1001", "/activity?after=-1", "/activity?since=yesterday", "/activity?subAgentId=x",
		} {
			resp := st.call(t, http.MethodGet, base+q, nil, alice.auth)
			assert.Equal(t, http.StatusUnprocessableEntity, resp.Code, "%s: %s", q, resp.String())
		}
	})
	t.Run("401 without a token", func(t *testing.T) {
		assert.Equal(t, http.StatusUnauthorized, st.call(t, http.MethodGet, base+"/messages", nil).Code)
	})
}

func TestAgentLogsADecision(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{}, true)
	alice := newUser(t)
	s, key := st.running(t, alice, nil)
	other, otherKey := st.running(t, alice, nil)
	path := func(id uuid.UUID) string { return "/api/agent/sessions/" + id.String() + "/log" }

	resp := st.call(t, http.MethodPost, path(s.ID), map[string]any{"content": "Kept the package layout."}, agentAuth(key), "Idempotency-Key: log-1")
	require.Equal(t, http.StatusCreated, resp.Code, resp.String())
	entry := decode[LogEntry](t, resp)
	assert.Equal(t, s.ID, entry.SessionID)
	assert.Equal(t, "decision", entry.Kind)
	assert.Equal(t, "Kept the package layout.", entry.Content)

	again := st.call(t, http.MethodPost, path(s.ID), map[string]any{"content": "Kept the package layout."}, agentAuth(key), "Idempotency-Key: log-1")
	require.Equal(t, http.StatusCreated, again.Code, again.String())
	assert.Equal(t, entry.ID, decode[LogEntry](t, again).ID, "a repeat returns the first entry")

	resp = st.call(t, http.MethodPost, path(s.ID), map[string]any{"decision": "Keep the layout", "rationale": "Both packages are small."}, agentAuth(key))
	require.Equal(t, http.StatusCreated, resp.Code, resp.String())
	assert.Equal(t, "Keep the layout\nRationale: Both packages are small.", decode[LogEntry](t, resp).Content)

	resp = st.call(t, http.MethodGet, "/api/agents/sessions/"+s.ID.String()+"/logs", nil, alice.auth)
	require.Equal(t, http.StatusOK, resp.Code, resp.String())
	log := decode[SessionLog](t, resp)
	require.Len(t, log.Items, 2, "the repeat appended nothing")
	assert.Equal(t, LogChunk{SequenceNumber: 0, Kind: "decision", Content: "Kept the package layout.", RecordedAt: log.Items[0].RecordedAt}, log.Items[0])
	assert.Equal(t, "decision", log.Items[1].Kind)

	t.Run("422 without content or over 2000 characters", func(t *testing.T) {
		for name, body := range map[string]map[string]any{
			"empty":             {},
			"blank":             {"content": "  "},
			"rationale only":    {"rationale": "Because."},
			"too long":          {"content": strings.Repeat("x", 2001)},
			"too long together": {"decision": strings.Repeat("x", 1500), "rationale": strings.Repeat("y", 1500)},
		} {
			resp := st.call(t, http.MethodPost, path(other.ID), body, agentAuth(otherKey))
			assert.Equal(t, http.StatusUnprocessableEntity, resp.Code, "%s: %s", name, resp.String())
		}
	})
	t.Run("an agent key logs to its own session only", func(t *testing.T) {
		resp := st.call(t, http.MethodPost, path(other.ID), map[string]any{"content": "Not mine."}, agentAuth(key))
		require.Equal(t, http.StatusForbidden, resp.Code, resp.String())
		assert.Equal(t, "forbidden", resp.problem(t)["kind"])
	})
	t.Run("401 for a person's token or no key", func(t *testing.T) {
		assert.Equal(t, http.StatusUnauthorized, st.call(t, http.MethodPost, path(s.ID), map[string]any{"content": "x"}, alice.auth).Code)
		assert.Equal(t, http.StatusUnauthorized, st.call(t, http.MethodPost, path(s.ID), map[string]any{"content": "x"}).Code)
	})
	t.Run("409 before the session starts", func(t *testing.T) {
		queued, queuedKey := st.start(t, alice, nil)
		resp := st.call(t, http.MethodPost, path(queued.ID), map[string]any{"content": "Too early."}, agentAuth(queuedKey))
		require.Equal(t, http.StatusConflict, resp.Code, resp.String())
		assert.Equal(t, "Queued", resp.problem(t)["currentStatus"])
	})
}
