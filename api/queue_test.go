package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
)

func TestMessageQueue(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{QueueRate: 0.001, QueueBurst: 6}, true)
	alice, bob := newUser(t), newUser(t)
	s, _ := st.running(t, alice, nil)
	base := "/api/agents/sessions/" + s.ID.String() + "/messages/queue"
	enqueue := func(content, priority string) MessageQueue {
		t.Helper()
		body := map[string]any{"content": content}
		if priority != "" {
			body["priority"] = priority
		}
		resp := st.call(t, http.MethodPost, base, body, alice.auth)
		require.Equal(t, http.StatusCreated, resp.Code, resp.String())
		return decode[MessageQueue](t, resp)
	}

	empty := decode[MessageQueue](t, st.call(t, http.MethodGet, base, nil, alice.auth))
	assert.Equal(t, s.ID, empty.SessionID)
	assert.Empty(t, empty.Pending)
	assert.Empty(t, empty.Messages)

	q1 := enqueue("later", "")
	require.NotNil(t, q1.MessageID)
	later := *q1.MessageID
	assert.Equal(t, "Queued", q1.Pending[0].Priority, "Queued by default")
	q2 := enqueue("now", "Immediate")
	now := *q2.MessageID
	assert.Equal(t, []uuid.UUID{now, later}, ids(q2.Pending), "Immediate is delivered first")
	third := *enqueue("third", "Queued").MessageID

	t.Run("view", func(t *testing.T) {
		resp := st.call(t, http.MethodGet, base, nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		v := decode[MessageQueue](t, resp)
		assert.Nil(t, v.MessageID)
		assert.Equal(t, []uuid.UUID{now, later, third}, ids(v.Pending))
		assert.Equal(t, []uuid.UUID{later, now, third}, ids(v.Messages), "all, in arrival order")
		assert.Equal(t, "User", v.Messages[0].Source)
	})
	t.Run("promote", func(t *testing.T) {
		resp := st.call(t, http.MethodPatch, base+"/"+third.String()+"/promote", nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		v := decode[MessageQueue](t, resp)
		assert.Equal(t, []uuid.UUID{now, third, later}, ids(v.Pending))

		resp = st.call(t, http.MethodPatch, base+"/"+third.String()+"/promote", nil, alice.auth)
		require.Equal(t, http.StatusConflict, resp.Code, "already Immediate: %s", resp.String())
		assert.Equal(t, "Immediate", resp.problem(t)["currentStatus"])
	})
	t.Run("cancel", func(t *testing.T) {
		resp := st.call(t, http.MethodDelete, base+"/"+later.String(), nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		v := decode[MessageQueue](t, resp)
		assert.Equal(t, []uuid.UUID{now, third}, ids(v.Pending))
		assert.Equal(t, "Cancelled", v.Messages[0].Status)
		assert.NotNil(t, v.Messages[0].CancelledAt)

		resp = st.call(t, http.MethodDelete, base+"/"+later.String(), nil, alice.auth)
		require.Equal(t, http.StatusConflict, resp.Code, resp.String())
		assert.Equal(t, "Cancelled", resp.problem(t)["currentStatus"])
	})
	t.Run("enqueue after a message left the queue", func(t *testing.T) {
		v := enqueue("fourth", "Queued")
		assert.Equal(t, []uuid.UUID{now, third, *v.MessageID}, ids(v.Pending))
		assert.Equal(t, []uuid.UUID{later, now, third, *v.MessageID}, ids(v.Messages), "the cancelled one too, in arrival order")
		assert.Equal(t, "Cancelled", v.Messages[0].Status)
	})
	t.Run("errors of each command", func(t *testing.T) {
		for _, c := range []struct{ method, suffix string }{
			{http.MethodDelete, ""}, {http.MethodPatch, "/promote"},
		} {
			unknown := st.call(t, c.method, base+"/"+uuid.NewString()+c.suffix, nil, alice.auth)
			assert.Equal(t, http.StatusNotFound, unknown.Code, "unknown message: %s", unknown.String())
			other := st.call(t, c.method, base+"/"+now.String()+c.suffix, nil, bob.auth)
			assert.Equal(t, http.StatusNotFound, other.Code, "another owner's: %s", other.String())
			bad := st.call(t, c.method, base+"/nope"+c.suffix, nil, alice.auth)
			assert.Equal(t, http.StatusUnprocessableEntity, bad.Code, bad.String())
			assert.Equal(t, http.StatusUnauthorized, st.call(t, c.method, base+"/"+now.String()+c.suffix, nil).Code)
		}
	})
	t.Run("422 on enqueue", func(t *testing.T) {
		for name, body := range map[string]map[string]any{
			"empty":            {"content": ""},
			"too long":         {"content": strings.Repeat("x", 4001)},
			"unknown priority": {"content": "hi", "priority": "Urgent"},
			"blank":            {"content": "   "},
		} {
			resp := st.call(t, http.MethodPost, base, body, alice.auth)
			require.Equal(t, http.StatusUnprocessableEntity, resp.Code, "%s: %s", name, resp.String())
			assert.Equal(t, "validation", resp.problem(t)["kind"], name)
		}
	})
	t.Run("409 when the session ended", func(t *testing.T) {
		done := st.idle(t, alice, nil)
		require.Equal(t, http.StatusOK, st.call(t, http.MethodPost, "/api/agents/sessions/"+done.ID.String()+"/close", nil, alice.auth).Code)
		resp := st.call(t, http.MethodPost, "/api/agents/sessions/"+done.ID.String()+"/messages/queue", map[string]any{"content": "hi"}, alice.auth)
		require.Equal(t, http.StatusConflict, resp.Code, resp.String())
		assert.Equal(t, "Completed", resp.problem(t)["currentStatus"])
	})
	t.Run("404 and 401 on enqueue", func(t *testing.T) {
		resp := st.call(t, http.MethodPost, "/api/agents/sessions/"+uuid.NewString()+"/messages/queue", map[string]any{"content": "hi"}, alice.auth)
		assert.Equal(t, http.StatusNotFound, resp.Code, resp.String())
		assert.Equal(t, http.StatusUnauthorized, st.call(t, http.MethodPost, base, map[string]any{"content": "hi"}).Code)
	})
	t.Run("429 when a session's queue is flooded", func(t *testing.T) {
		flooded, _ := st.running(t, alice, nil)
		path := "/api/agents/sessions/" + flooded.ID.String() + "/messages/queue"
		// Another owner's attempts do not spend this session's allowance.
		for range 10 {
			require.Equal(t, http.StatusNotFound, st.call(t, http.MethodPost, path, map[string]any{"content": "spam"}, bob.auth).Code)
		}
		for i := range 6 {
			resp := st.call(t, http.MethodPost, path, map[string]any{"content": "hi"}, alice.auth)
			require.Equal(t, http.StatusCreated, resp.Code, "message %d: %s", i, resp.String())
		}
		resp := st.call(t, http.MethodPost, path, map[string]any{"content": "one too many"}, alice.auth)
		require.Equal(t, http.StatusTooManyRequests, resp.Code, resp.String())
		assert.NotEmpty(t, resp.Header.Get("Retry-After"))
		assert.Equal(t, "rate_limited", resp.problem(t)["kind"])
		assert.Len(t, decode[MessageQueue](t, st.call(t, http.MethodGet, path, nil, alice.auth)).Messages, 6)
	})
}

func ids(ms []QueuedMessage) []uuid.UUID {
	out := []uuid.UUID{}
	for _, m := range ms {
		out = append(out, m.MessageID)
	}
	return out
}

func TestAgentOutput(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{}, true)
	alice := newUser(t)
	s, key := st.running(t, alice, nil)
	other, otherKey := st.running(t, alice, nil)
	path := func(id uuid.UUID) string { return "/api/agent/sessions/" + id.String() + "/output" }
	output := map[string]any{"outputLineCount": 420, "filesChanged": 4, "testsAdded": 6, "allTestsPassing": true,
		"commitSha": "9fceb02d0ae598e95dc970b74767f19372d61af8"}

	resp := st.call(t, http.MethodPost, path(s.ID), output, agentAuth(key))
	require.Equal(t, http.StatusOK, resp.Code, resp.String())
	got := decode[SessionDetail](t, resp)
	assert.Equal(t, "Idle", got.Status)
	assert.True(t, got.HasPendingReview)
	assert.Equal(t, &Output{OutputLineCount: 420, FilesChanged: 4, TestsAdded: 6, AllTestsPassing: true,
		CommitSha: "9fceb02d0ae598e95dc970b74767f19372d61af8"}, got.Output)
	assert.True(t, st.session(t, alice, s.ID).HasPendingReview, "the owner sees the output")

	t.Run("409 when the session is not running", func(t *testing.T) {
		resp := st.call(t, http.MethodPost, path(s.ID), output, agentAuth(key))
		require.Equal(t, http.StatusConflict, resp.Code, resp.String())
		assert.Equal(t, "Idle", resp.problem(t)["currentStatus"])
	})
	t.Run("422 for a bad commit", func(t *testing.T) {
		bad := map[string]any{"filesChanged": 1, "outputLineCount": 1, "testsAdded": 0, "allTestsPassing": true, "commitSha": "abc"}
		resp := st.call(t, http.MethodPost, path(other.ID), bad, agentAuth(otherKey))
		require.Equal(t, http.StatusUnprocessableEntity, resp.Code, resp.String())
		neg := map[string]any{"filesChanged": -1, "outputLineCount": 1, "testsAdded": 0, "allTestsPassing": true}
		assert.Equal(t, http.StatusUnprocessableEntity, st.call(t, http.MethodPost, path(other.ID), neg, agentAuth(otherKey)).Code)
	})
	t.Run("an agent key cannot touch another session", func(t *testing.T) {
		resp := st.call(t, http.MethodPost, path(other.ID), output, agentAuth(key))
		require.Equal(t, http.StatusForbidden, resp.Code, resp.String())
		assert.Equal(t, "forbidden", resp.problem(t)["kind"])
		assert.Equal(t, "Running", st.session(t, alice, other.ID).Status)
	})
	t.Run("an agent key is not a person's token", func(t *testing.T) {
		for _, p := range []string{"/api/agents/sessions/" + s.ID.String(), "/api/agents/sessions"} {
			assert.Equal(t, http.StatusUnauthorized, st.call(t, http.MethodGet, p, nil, agentAuth(key)).Code, p)
		}
	})
	t.Run("401", func(t *testing.T) {
		assert.Equal(t, http.StatusUnauthorized, st.call(t, http.MethodPost, path(other.ID), output).Code, "no key")
		assert.Equal(t, http.StatusUnauthorized, st.call(t, http.MethodPost, path(other.ID), output, agentAuth("abk_nope")).Code, "unknown key")
		assert.Equal(t, http.StatusUnauthorized, st.call(t, http.MethodPost, path(other.ID), output, alice.auth).Code, "a person's token")
	})
	t.Run("a malformed session id is not the agent's session", func(t *testing.T) {
		resp := st.call(t, http.MethodPost, "/api/agent/sessions/nope/output", output, agentAuth(key))
		assert.Equal(t, http.StatusForbidden, resp.Code, resp.String())
	})
}

// TestQueueAfterReadsHistoryOnlyWhenMessagesLeft checks that a queue
// command's answer is built from the command's result alone while every
// message enqueued so far is pending, and from the message history once
// one has left the queue. The server has no queries: a read fails.
func TestQueueAfterReadsHistoryOnlyWhenMessagesLeft(t *testing.T) {
	t.Parallel()
	s := &Server{}
	session := uuid.New()
	msg := func(seq int64, priority domain.MessagePriority) domain.SessionMessage {
		return domain.SessionMessage{MessageID: uuid.New(), Content: "m", Priority: priority, Status: domain.MessagePending,
			Source: domain.MessageFromUser, Sequence: seq}
	}
	first, second := msg(0, domain.PriorityQueued), msg(1, domain.PriorityImmediate)
	state := func(next int64, pending ...domain.SessionMessage) json.RawMessage {
		raw, err := json.Marshal(command.QueueState{SessionID: session, Pending: pending, NextSequence: next})
		require.NoError(t, err)
		return raw
	}

	v, err := s.queueAfter(context.Background(), state(2, second, first))
	require.NoError(t, err, "nothing left the queue: no read")
	assert.Equal(t, session, v.SessionID)
	assert.Equal(t, []uuid.UUID{second.MessageID, first.MessageID}, messageIDs(v.Pending), "delivery order")
	assert.Equal(t, []uuid.UUID{first.MessageID, second.MessageID}, messageIDs(v.Messages), "arrival order")

	v, err = s.queueAfter(context.Background(), state(0))
	require.NoError(t, err)
	assert.NotNil(t, v.Pending)
	assert.NotNil(t, v.Messages)

	for name, raw := range map[string]json.RawMessage{
		"first left":       state(2, second),
		"duplicate number": state(2, second, second),
		"number too high":  state(2, first, msg(2, domain.PriorityQueued)),
	} {
		_, err := s.queueAfter(context.Background(), raw)
		var se huma.StatusError
		require.ErrorAs(t, err, &se, "%s: the history is read", name)
		assert.Equal(t, http.StatusServiceUnavailable, se.GetStatus(), name)
	}
}

func messageIDs(ms []domain.SessionMessage) []uuid.UUID {
	out := []uuid.UUID{}
	for _, m := range ms {
		out = append(out, m.MessageID)
	}
	return out
}
