package cli

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/client"
)

// TestRendererWritesStreamedTextOnce feeds the renderer the text deltas of
// a block, the finished block, then a block whose deltas it saw only in
// part: streamed text is finished on its line, not written twice.
func TestRendererWritesStreamedTextOnce(t *testing.T) {
	var out bytes.Buffer
	r := &renderer{w: &out}
	for _, ev := range []client.Event{
		{Name: "text_delta", Data: []byte(`{"messageId":"m1","index":0,"text":"Looking at ","occurredAt":"2025-01-02T15:04:05Z"}`)},
		{Name: "text_delta", Data: []byte(`{"messageId":"m1","index":0,"text":"the project","occurredAt":"2025-01-02T15:04:05Z"}`)},
		{Name: "assistant_text", Data: []byte(`{"messageId":"m1","text":"Looking at the project.\nIt is small.","occurredAt":"2025-01-02T15:04:06Z"}`)},
		{Name: "text_delta", Data: []byte(`{"messageId":"m2","index":0,"text":"Runn","occurredAt":"2025-01-02T15:04:07Z"}`)},
		{Name: "tool_call", Data: []byte(`{"toolName":"Bash","input":{"command":"go test ./..."},"occurredAt":"2025-01-02T15:04:08Z"}`)},
		{Name: "tool_result", Data: []byte(`{"toolName":"Bash","content":"FAIL\nexit 1","isError":true,"occurredAt":"2025-01-02T15:04:09Z"}`)},
		{Name: "assistant_text", Data: []byte(`{"messageId":"m2","subAgentId":"7a2d4c1b-3e5f","text":"Running the tests.","occurredAt":"2025-01-02T15:04:10Z"}`)},
		{Name: "event", Data: []byte(`{"type":"session_waiting_for_input","aggregate":"session","occurredAt":"2025-01-02T15:04:11Z",` +
			`"data":{"sessionId":"s","questionContent":"Which one?","options":["A","B"],"ratio":0.123456,"n":3}}`)},
	} {
		require.NoError(t, r.render(ev))
	}
	want := regexp.MustCompile(`^` +
		`\d\d:\d\d:\d\d  assistant  Looking at the project\.\n {21}It is small\.\n` +
		`\d\d:\d\d:\d\d  assistant  Runn\n` +
		`\d\d:\d\d:\d\d  → Bash     \$ go test \./\.\.\.\n` +
		`\d\d:\d\d:\d\d  ← Bash     error: FAIL exit 1\n` +
		`\d\d:\d\d:\d\d  subagent 7a2d4c1b Running the tests\.\n` +
		`\d\d:\d\d:\d\d  ● session waiting for input n=3 options=\[A \| B\] questionContent="Which one\?" ratio=0\.1235\n$`)
	assert.Regexp(t, want, out.String())
}

func TestEndsSessionOnlyOnFinalEvents(t *testing.T) {
	ev := func(name, data string) client.Event { return client.Event{Name: name, Data: []byte(data)} }
	assert.True(t, endsSession(ev("event", `{"type":"agent_session_approved","aggregate":"session"}`)))
	assert.True(t, endsSession(ev("event", `{"type":"session_cancelled","aggregate":"session"}`)))
	assert.True(t, endsSession(ev("event", `{"type":"agent_session_closed","aggregate":"session"}`)))
	assert.False(t, endsSession(ev("event", `{"type":"agent_session_failed","aggregate":"session"}`)), "a failed session may be retried")
	assert.False(t, endsSession(ev("activity", `{"type":"agent_session_approved"}`)))
}
