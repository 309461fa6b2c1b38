package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
)

func TestFailedSessionsArePostedOnceAndOthersIgnored(t *testing.T) {
	_, js, _ := bustest.Server(t)
	var mu sync.Mutex
	var got []map[string]any
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // the first attempt fails: the runner retries
			return
		}
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		got = append(got, body)
	}))
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, js, srv.URL) }()
	defer func() { cancel(); <-done }()

	session := uuid.NewString()
	for _, typ := range []string{"session_paused", "agent_session_failed"} {
		env, err := bus.NewEnvelope(typ, "session", session, 1, uuid.NewString(), map[string]string{"reason": "AgentError"})
		require.NoError(t, err)
		msg, err := bus.NewMsg(ctx, bus.EventSubject("session", session, typ), env)
		require.NoError(t, err)
		_, err = js.PublishMsg(ctx, msg)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 1 }, 30*time.Second, 20*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, "agent_session_failed", got[0]["event"])
	assert.Equal(t, session, got[0]["sessionId"])
	assert.Equal(t, 2, calls, "one failed attempt, one delivered; the pause was not posted")
}
