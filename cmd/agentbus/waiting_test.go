package main

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/client"
)

// waitingSession is what a session's detail says it waits for.
type waitingSession struct {
	Status     string `json:"status"`
	WaitingFor *struct {
		Kind     string     `json:"kind"`
		Detail   string     `json:"detail"`
		ToolName string     `json:"toolName"`
		Since    *time.Time `json:"since"`
		Deadline *time.Time `json:"deadline"`
	} `json:"waitingFor"`
}

// TestAPausedSessionSaysItWaitsForItsRunningToolCall pauses a session of
// up's real runtime during its minute-long tool call: until the call ends
// the session is Pausing, and its detail, the command line's show and its
// live stream say that it waits for that call, since the call started.
func TestAPausedSessionSaysItWaitsForItsRunningToolCall(t *testing.T) {
	bin := buildAgentbus(t)
	u := startUpWithRuntime(t)
	c := &cliUnderTest{t: t, bin: bin, api: u.base, token: u.token}
	id := u.start(map[string]any{"workingDirectory": "waiting", "objective": "Run the suite [scenario:long]"})
	u.waitStatus(id, "Running")

	var activity struct {
		Items []struct {
			Type      string    `json:"type"`
			ToolName  string    `json:"toolName"`
			Timestamp time.Time `json:"timestamp"`
		} `json:"items"`
	}
	var started time.Time
	require.Eventually(t, func() bool {
		u.Must(http.MethodGet, "/api/agents/sessions/"+id+"/activity", nil, &activity)
		for _, it := range activity.Items {
			if it.Type == "ToolCallStart" && it.ToolName == "Bash" {
				started = it.Timestamp
			}
		}
		return !started.IsZero()
	}, 2*wait, 50*time.Millisecond, "the activity never showed the call starting")

	var s waitingSession
	u.Must(http.MethodGet, "/api/agents/sessions/"+id, nil, &s)
	require.NotNil(t, s.WaitingFor, "a running session says what it waits for")
	assert.Equal(t, "ToolCall", s.WaitingFor.Kind)
	assert.Equal(t, "Bash: make integration-test", s.WaitingFor.Detail)

	u.Must(http.MethodPost, "/api/agents/sessions/"+id+"/pause", nil, nil)
	u.Must(http.MethodGet, "/api/agents/sessions/"+id, nil, &s)
	require.Equal(t, "Pausing", s.Status, "the minute-long call holds the pause")
	require.NotNil(t, s.WaitingFor)
	assert.Equal(t, "ToolCall", s.WaitingFor.Kind)
	assert.Equal(t, "Bash", s.WaitingFor.ToolName)
	assert.Equal(t, "Bash: make integration-test (the session pauses once it ends)", s.WaitingFor.Detail)
	require.NotNil(t, s.WaitingFor.Since)
	assert.True(t, started.Equal(*s.WaitingFor.Since), "it waits since the call started (%s), not %s", started, *s.WaitingFor.Since)
	assert.Nil(t, s.WaitingFor.Deadline, "a tool call has no deadline")

	// The live stream says it too, once it is live.
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var told waitingSession
	streamed := (&client.Client{Base: u.base, Token: u.token}).FollowSession(ctx, id, client.Follow{}, func(ev client.Event) error {
		if ev.Name != "waiting" {
			return nil
		}
		require.NoError(t, json.Unmarshal(ev.Data, &told))
		return client.Stop()
	})
	require.NoError(t, streamed)
	require.NotNil(t, told.WaitingFor, "the stream said what the session waits for")
	assert.Equal(t, *s.WaitingFor, *told.WaitingFor)

	shown := c.must("sessions", "show", id)
	assert.Regexp(t, `(?m)^Waiting for\s+tool call Bash: make integration-test \(the session pauses once it ends\), since \d\d:\d\d:\d\d$`, shown)
	assert.Regexp(t, `(?m)^Runner\s+\S+$`, shown, "show names the runner whose host runs the sidecar")

	// A session whose output awaits review waits for that; once approved,
	// for nothing.
	hello := u.start(map[string]any{"workingDirectory": "waiting-hello", "objective": "Say hello"})
	u.waitReview(hello)
	u.Must(http.MethodGet, "/api/agents/sessions/"+hello, nil, &s)
	require.NotNil(t, s.WaitingFor)
	assert.Equal(t, "Review", s.WaitingFor.Kind)
	assert.NotNil(t, s.WaitingFor.Since, "since its last turn ended")
	c.must("sessions", "approve", hello)
	var done waitingSession
	u.Must(http.MethodGet, "/api/agents/sessions/"+hello, nil, &done)
	assert.Equal(t, "Completed", done.Status)
	assert.Nil(t, done.WaitingFor, "a completed session waits for nothing")
}
