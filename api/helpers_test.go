package api

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2/humatest"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/sidecar/workspace"
)

func TestMain(m *testing.M) {
	testenv.Main(m)
}

const testSecret = "test-secret"

// newServer builds a Server with the test secret unless cfg has its own.
func newServer(t *testing.T, cfg Config, deps Deps) *Server {
	t.Helper()
	if cfg.JWTSecret == "" && cfg.JWKSURL == "" {
		cfg.JWTSecret = testSecret
	}
	if cfg.Workspace == "" {
		cfg.Workspace = workspace.Root(t.TempDir())
	}
	s, err := New(cfg, deps)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// testAPI wraps s for humatest requests (no network).
func testAPI(t *testing.T, s *Server) humatest.TestAPI {
	return humatest.Wrap(t, s.API())
}

// bearer returns an Authorization header argument for humatest.
func bearer(t *testing.T, user string) string {
	t.Helper()
	tok, err := NewToken(testSecret, user, time.Hour)
	require.NoError(t, err)
	return "Authorization: Bearer " + tok
}

// decodeProblem decodes a problem+json body.
func decodeProblem(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var p map[string]any
	require.NoError(t, json.Unmarshal(body, &p), string(body))
	return p
}

// sseEvent is one parsed Server-Sent Event.
type sseEvent struct {
	ID    string
	Event string
	Data  string
}

// readSSE parses the events of body into a channel, closed at the end of
// the stream.
func readSSE(body interface{ Read([]byte) (int, error) }) <-chan sseEvent {
	ch := make(chan sseEvent, 1024)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.Data != "" || ev.Event != "" || ev.ID != "" {
					if ev.Event == "" {
						ev.Event = "message"
					}
					ch <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.ID = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.Event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.Data += strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return ch
}

// openStream opens an SSE stream over real HTTP; the response is closed
// when the test ends.
func openStream(t *testing.T, client *http.Client, url, token string, header http.Header) (*http.Response, <-chan sseEvent) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		return resp, nil
	}
	return resp, readSSE(resp.Body)
}

// next returns the next event that is not a ping, failing after timeout.
func next(t *testing.T, ch <-chan sseEvent, timeout time.Duration) sseEvent {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("stream ended")
			}
			if ev.Event == "ping" {
				continue
			}
			return ev
		case <-deadline:
			t.Fatalf("no event within %s", timeout)
		}
	}
}

// nextAny returns the next event, pings included.
func nextAny(t *testing.T, ch <-chan sseEvent, timeout time.Duration) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatalf("stream ended")
		}
		return ev
	case <-time.After(timeout):
		t.Fatalf("no event within %s", timeout)
	}
	return sseEvent{}
}
