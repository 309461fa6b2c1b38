package claude_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/uptest"
)

// TestClaudeTextDeltasReachTheLiveFeedBeforeTheTurnEnds runs a claude
// session through `agentbus up` with the real CLI while the scripted model
// holds its response open after the text: a UI reading the session's live
// feed must already see the answer typed out as text_delta items, while
// the session is still Running.
func TestClaudeTextDeltasReachTheLiveFeedBeforeTheTurnEnds(t *testing.T) {
	const answer = "Streaming hello to you."
	w := newWorld(t, reply{blocks: []block{text(answer)}, hold: time.Hour})
	u := startUp(t, w)
	var started struct {
		Session uptest.Session `json:"session"`
	}
	u.Must(http.MethodPost, "/api/agents/sessions", map[string]any{"workingDirectory": "deltas",
		"objective": "Say hello slowly.", "budgetCapUsd": 5}, &started)
	id := started.Session.ID

	req, err := http.NewRequest(http.MethodGet, u.base+"/api/agents/sessions/"+id+"/stream", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+u.token)
	req.Header.Set("Last-Event-ID", "0")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	typed := make(chan string, 1)
	go func() {
		defer close(typed)
		var streamed strings.Builder
		event := ""
		lines := bufio.NewScanner(resp.Body)
		lines.Buffer(make([]byte, 64<<10), 1<<20)
		for lines.Scan() {
			line := lines.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "text_delta":
				var d struct {
					Text string `json:"text"`
				}
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d) == nil {
					streamed.WriteString(d.Text)
				}
				if streamed.String() == answer {
					typed <- streamed.String()
					return
				}
			}
		}
	}()
	select {
	case got := <-typed:
		assert.Equal(t, answer, got)
	case <-time.After(2 * wait):
		t.Fatalf("the live feed did not type out the answer:\n%s", u.log)
	}
	s := u.Session(id)
	assert.Equal(t, "Running", s.Status, "the model still holds its response: the turn has not ended")
}
