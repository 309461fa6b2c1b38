package localsocket

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/doors"
)

// recordingAPI answers every call as the API would for a started session
// and records the Authorization each call carried.
type recordingAPI struct {
	authz string
	mu    *sync.Mutex
	calls *[]string
}

func (a recordingAPI) Call(_ context.Context, method, path string, _ any) (doors.Response, error) {
	a.mu.Lock()
	*a.calls = append(*a.calls, a.authz+" "+method+" "+path)
	a.mu.Unlock()
	body, _ := json.Marshal(map[string]any{"session": map[string]any{"id": uuid.NewString(), "status": "Starting"}})
	return doors.Response{Status: http.StatusCreated, Header: http.Header{}, Body: body}, nil
}

// idleFeed has nothing to tell.
type idleFeed struct{}

func (idleFeed) Follow(ctx context.Context, _ uuid.UUID, _ uint64, _ func(doors.Item) error) error {
	<-ctx.Done()
	return ctx.Err()
}

// socketUnderTest serves a socket whose only valid token is "good" (user
// alice); mapped, when true, maps this process's uid to bob.
type socketUnderTest struct {
	path  string
	mu    sync.Mutex
	calls []string
}

func serveTestSocket(t *testing.T, mapped bool) *socketUnderTest {
	t.Helper()
	dir, err := os.MkdirTemp("", "ls")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s := &socketUnderTest{path: filepath.Join(dir, "agent.sock")}
	as := func(user string) Caller {
		return Caller{UserID: user, API: recordingAPI{authz: "Bearer " + user, mu: &s.mu, calls: &s.calls}, Feed: idleFeed{}}
	}
	creds := Credentials{Token: func(_ context.Context, token string) (Caller, error) {
		if token != "good" {
			return Caller{}, &doors.Error{Kind: doors.KindUnauthorized, Status: http.StatusUnauthorized, Message: "invalid token: token is expired"}
		}
		return as("alice"), nil
	}}
	if mapped {
		creds.ByUID = map[uint32]func() (Caller, error){uint32(os.Getuid()): func() (Caller, error) { return as("bob"), nil }}
	}
	srv, err := Listen(Config{Path: s.path, AuthTimeout: 300 * time.Millisecond}, creds)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return s
}

func (s *socketUnderTest) recorded() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// exchange connects, writes lines and returns every line the server
// wrote until it closed the connection or went quiet for a moment.
func (s *socketUnderTest) exchange(t *testing.T, lines ...string) (got []map[string]any, closed bool) {
	t.Helper()
	c, err := net.Dial("unix", s.path)
	require.NoError(t, err)
	defer c.Close()
	for _, l := range lines {
		// A refused connection may be closed before its later lines.
		if _, err := c.Write([]byte(l + "\n")); err != nil {
			break
		}
	}
	r := bufio.NewReader(c)
	for {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Second)))
		raw, err := r.ReadBytes('\n')
		if err != nil {
			var ne net.Error
			timedOut := errors.As(err, &ne) && ne.Timeout()
			return got, !timedOut
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal(raw, &m), string(raw))
		got = append(got, m)
	}
}

const startLine = `{"type":"start_session","sessionId":"s","prompt":"hello","requestId":"r2"}`

// TestAConnectionActsOnlyForTheUserOfItsToken: the socket acts for no
// default user; a connection is refused (unauthorized, then closed) unless
// its first message authenticates with a token the API accepts, and its
// calls then carry that token's user; a uid the operator mapped acts for
// its user without a token.
func TestAConnectionActsOnlyForTheUserOfItsToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mapped bool
		lines  []string
		// want are the types (and, for an error, kinds) of the lines the
		// server writes, in order.
		want    []string
		closed  bool
		message string
		// user is whom every call that reached the API was made for; ""
		// when none did.
		user string
	}{
		{name: "a command first is refused", lines: []string{startLine},
			want: []string{"error/unauthorized"}, closed: true, message: `{"type":"authenticate","token":"<bearer token>"}`},
		{name: "a line that is not JSON is refused", lines: []string{"hello"},
			want: []string{"error/unauthorized"}, closed: true, message: "the first message must be"},
		{name: "nothing within the time allowed is refused", lines: nil,
			want: []string{"error/unauthorized"}, closed: true, message: "no authenticate message within"},
		{name: "authenticate without a token is refused", lines: []string{`{"type":"authenticate"}`, startLine},
			want: []string{"error/unauthorized"}, closed: true, message: "authenticate needs a token"},
		{name: "a token the API refuses is refused", lines: []string{`{"type":"authenticate","token":"expired","requestId":"r1"}`, startLine},
			want: []string{"error/unauthorized"}, closed: true, message: "invalid token: token is expired"},
		{name: "a good token acts for its user", lines: []string{`{"type":"authenticate","token":"good","requestId":"r1"}`, startLine},
			want: []string{"authenticated", "session_status"}, user: "alice"},
		{name: "authenticate is the first message only", lines: []string{`{"type":"authenticate","token":"good"}`, `{"type":"authenticate","token":"good","requestId":"again"}`, startLine},
			want: []string{"authenticated", "error/validation", "session_status"}, message: "already authenticated", user: "alice"},
		{name: "a mapped uid acts for its user without a token", mapped: true, lines: []string{startLine},
			want: []string{"session_status"}, user: "bob"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := serveTestSocket(t, tt.mapped)
			got, closed := s.exchange(t, tt.lines...)
			var types []string
			var messages string
			for _, m := range got {
				typ := m["type"].(string)
				if typ == "error" {
					typ += "/" + m["kind"].(string)
					messages += m["message"].(string) + "\n"
				}
				types = append(types, typ)
			}
			assert.Equal(t, tt.want, types, "%v", got)
			assert.Equal(t, tt.closed, closed, "closed")
			assert.Contains(t, messages, tt.message)
			calls := s.recorded()
			if tt.user == "" {
				assert.Empty(t, calls, "no call reached the API")
			} else {
				assert.Contains(t, calls, "Bearer "+tt.user+" POST /api/agents/sessions")
				for _, c := range calls {
					assert.Regexp(t, "^Bearer "+tt.user+" ", c, "every call is the user's")
				}
			}
			if tt.want[0] == "authenticated" {
				assert.Equal(t, "alice", got[0]["userId"])
			}
			if tt.want[0] == "error/unauthorized" {
				assert.EqualValues(t, http.StatusUnauthorized, got[0]["status"])
			}
		})
	}
}
