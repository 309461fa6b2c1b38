package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/api"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/internal/uptest"
)

// socketClient is an NDJSON client of the local socket.
type socketClient struct {
	*msgLog
	c net.Conn
}

func dialSocket(t *testing.T, path string) *socketClient {
	t.Helper()
	c, err := net.Dial("unix", path)
	require.NoError(t, err)
	s := &socketClient{msgLog: newMsgLog(t), c: c}
	go func() {
		sc := bufio.NewScanner(c)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			s.add(append([]byte(nil), sc.Bytes()...))
		}
		s.end(sc.Err())
	}()
	t.Cleanup(func() { _ = c.Close() })
	return s
}

// dialAs connects and authenticates with token.
func dialAs(t *testing.T, path, token string) *socketClient {
	t.Helper()
	c := dialSocket(t, path)
	m := c.call("authenticate", map[string]any{"type": "authenticate", "token": token})
	require.Equal(t, "authenticated", m.Type, m.Raw)
	return c
}

// closedLog reports whether the other side closed the connection.
func closedLog(l *msgLog) func(doorMsg) bool {
	return func(doorMsg) bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.closed != nil
	}
}

// authLine is the authenticate message of token, as a line.
func authLine(token string) string {
	raw, _ := json.Marshal(map[string]any{"type": "authenticate", "token": token})
	return string(raw)
}

func (s *socketClient) send(msg map[string]any) {
	s.t.Helper()
	raw, err := json.Marshal(msg)
	require.NoError(s.t, err)
	s.sendLine(raw)
}

func (s *socketClient) sendLine(raw []byte) {
	s.t.Helper()
	_, err := s.c.Write(append(raw, '\n'))
	require.NoError(s.t, err)
}

func (s *socketClient) call(id string, msg map[string]any) doorMsg {
	s.t.Helper()
	msg["requestId"] = id
	s.send(msg)
	return s.waitFor("the answer to "+id, replyTo(id))
}

func (s *socketClient) mustCall(id string, msg map[string]any) doorMsg {
	s.t.Helper()
	m := s.call(id, msg)
	require.NotEqual(s.t, "error", m.Type, "%s answered %s", id, m.Raw)
	return m
}

// staleSocket leaves a socket file nobody listens on, as a killed server does.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	require.NoError(t, err)
	ln.SetUnlinkOnClose(false)
	require.NoError(t, ln.Close())
	_, err = os.Stat(path)
	require.NoError(t, err, "the stale file is there")
}

// mappedUID is the uid up maps to a user of its own in the socket tests;
// otherUID is a uid mapped to no one.
const (
	mappedUID = 65534
	otherUID  = 65533
)

// TestLocalSocketMultiplexesSessions drives script-engine sessions
// through up's local NDJSON socket, as seed 002's desktop app would. The
// socket acts for no default user: a connection acts for the user of the
// token it authenticates with, or for the user its uid is mapped to.
func TestLocalSocketMultiplexesSessions(t *testing.T) {
	dir, err := testenv.TempDir("socket")
	require.NoError(t, err)
	path := filepath.Join(dir, "agent.sock")
	staleSocket(t, path)
	user, mappedUser := uuid.NewString(), uuid.NewString()
	t.Setenv("AGENTBUS_DOOR_MAX_SESSIONS", "4")
	u := startUpWithRuntime(t, "--socket", path, "--socket-user-for-uid", fmt.Sprintf("%d=%s", mappedUID, mappedUser))
	token, err := api.NewToken(runtimeSecret, user, time.Hour)
	require.NoError(t, err)
	owner := &uptest.Client{T: t, Base: u.base, Token: token, Redis: u.redis, Wait: 2 * wait}

	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.NotZero(t, fi.Mode()&os.ModeSocket, "a socket replaced the stale file")
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	t.Run("a connection without a valid token is refused and closed", func(t *testing.T) {
		expired, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{Subject: user,
			ExpiresAt: jwt.NewNumericDate(time.Now().Add(-time.Hour))}).SignedString([]byte(runtimeSecret))
		require.NoError(t, err)
		forged, err := api.NewToken("another-secret", user, time.Hour)
		require.NoError(t, err)
		tests := []struct {
			name, first, message string
		}{
			{"no token, a command first", `{"type":"start_session","sessionId":"x","prompt":"Say hello","cwd":"x","budgetCapUsd":1}`, `{"type":"authenticate","token":"<bearer token>"}`},
			{"an empty token", `{"type":"authenticate","token":""}`, "authenticate needs a token"},
			{"an expired token", authLine(expired), "token is expired"},
			{"a token of another secret", authLine(forged), "signature is invalid"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				c := dialSocket(t, path)
				c.sendLine([]byte(tt.first))
				m := c.waitFor("the refusal", of("error", ""))
				assert.Equal(t, "unauthorized", m.field("kind"))
				assert.Contains(t, m.field("message"), tt.message)
				c.waitFor("the end of the connection", closedLog(c.msgLog))
				assert.Len(t, c.all(), 1, "nothing but the refusal")
			})
		}
		var list struct {
			Total int `json:"total"`
		}
		owner.Must(http.MethodGet, "/api/agents/sessions", nil, &list)
		assert.Zero(t, list.Total, "no session was started")
	})

	c := dialAs(t, path, token)
	start := func(name, prompt string, extra map[string]any) string {
		msg := map[string]any{"type": "start_session", "sessionId": name, "prompt": prompt, "cwd": "sock-" + name, "budgetCapUsd": 5}
		for k, v := range extra {
			msg[k] = v
		}
		m := c.mustCall("start-"+name, msg)
		assert.Equal(t, "started", m.field("status"))
		require.NotEmpty(t, m.field("agentbusSessionId"))
		return m.field("agentbusSessionId")
	}
	start("q", "Pick a database [scenario:question]", nil)
	permission := start("p", "Clean up [scenario:permission]", map[string]any{"toolApproval": map[string]any{"mode": "All"}})
	long := start("l", "Run the suite [scenario:long]", nil)
	start("f", "Run the suite [scenario:long]", nil)

	t.Run("the fifth session on the connection is refused", func(t *testing.T) {
		m := c.call("start-5", map[string]any{"type": "start_session", "sessionId": "five", "prompt": "One too many", "budgetCapUsd": 1})
		require.Equal(t, "error", m.Type, m.Raw)
		assert.Equal(t, "conflict", m.field("kind"))
	})

	t.Run("an invalid line gets an error and the connection stays", func(t *testing.T) {
		c.sendLine([]byte("{not json"))
		m := c.waitFor("the error", of("error", "", "not a JSON object"))
		assert.Equal(t, "validation", m.field("kind"))
		m = c.call("bogus", map[string]any{"type": "bogus", "sessionId": "q"})
		assert.Contains(t, m.field("message"), `unknown message type "bogus"`)
		c.sendLine([]byte(`{"type":"send_prompt","sessionId":"q","prompt":"` + strings.Repeat("x", 70<<10) + `"}`))
		c.waitFor("the oversized line's error", of("error", "", "more than the 65536"))
		m = c.call("nobody", map[string]any{"type": "interrupt", "sessionId": "nobody"})
		assert.Equal(t, "sessionId", m.field("field"), "the connection still answers: %s", m.Raw)
	})

	t.Run("system metadata, a question answered, text, and a prompt delivered", func(t *testing.T) {
		sys := c.waitFor("system", of("system", "q", `"engine":"script"`))
		assert.NotEmpty(t, sys.field("engineSessionId"))
		q := c.waitFor("the question", of("question", "q", "Which database should the service use?", "PostgreSQL"))
		c.mustCall(q.field("requestId"), map[string]any{"type": "question_response", "sessionId": "q",
			"answers": map[string]string{"Which database should the service use?": "PostgreSQL"}})
		c.waitFor("the answer's text", of("assistant_text", "q", "Going with PostgreSQL."))
		c.waitFor("the tool call", of("tool_use", "q", `"toolName":"Edit"`))
		c.waitFor("the result", of("result", "q"))
		m := c.mustCall("prompt", map[string]any{"type": "send_prompt", "sessionId": "q", "prompt": "Then write the migration"})
		assert.Equal(t, "prompt_queued", m.field("status"))
		c.waitFor("the delivery", func(m doorMsg) bool {
			return m.Type == "session_status" && m.field("status") == "prompt_delivered" && m.RequestID == "prompt"
		})
	})

	t.Run("an interrupt and a close end the long session, and a forced close the other", func(t *testing.T) {
		c.waitFor("the long tool call", of("tool_use", "l", "make integration-test"))
		c.mustCall("interrupt", map[string]any{"type": "interrupt", "sessionId": "l"})
		c.waitFor("interrupted", of("session_status", "l", `"agentbusStatus":"Interrupted"`))
		m := c.mustCall("close", map[string]any{"type": "close_session", "sessionId": "l"})
		assert.Equal(t, "closed", m.field("status"))
		owner.WaitFor(long, "Cancelled", func(s uptest.Session) bool { return s.Status == "Cancelled" })

		c.waitFor("the other long tool call", of("tool_use", "f", "make integration-test"))
		m = c.mustCall("force", map[string]any{"type": "close_session", "sessionId": "f", "force": true})
		assert.Equal(t, "closed", m.field("status"))
		// Closed sessions leave the connection: a new one fits again.
		start("l2", "Say hello", nil)
	})

	var lastSeen uint64
	t.Run("a disconnect denies the connection's pending permission requests", func(t *testing.T) {
		first := c.waitFor("the permission request", of("permission_request", "p", `"toolName":"Bash"`, "rm -rf build/"))
		// The requestId of a permission_response is the request's.
		c.mustCall(first.field("requestId"), map[string]any{"type": "permission_response", "sessionId": "p", "behavior": "allow"})
		c.waitFor("the allowed result", of("tool_result", "p", "removed build/"))
		c.waitFor("the second request", of("permission_request", "p", `"toolName":"Write"`))
		for _, m := range feedOf(c.all(), "p") {
			lastSeen = m.EventID
		}
		require.NoError(t, c.c.Close())
		require.Eventually(t, func() bool {
			return strings.Contains(owner.Activity(permission), "Permission to use Write was denied: Session closed")
		}, 2*wait, 100*time.Millisecond, "the pending request was not denied")
	})

	t.Run("resume_session picks up after the last event id, missing nothing and repeating nothing", func(t *testing.T) {
		again := dialAs(t, path, token)
		m := again.mustCall("resume", map[string]any{"type": "resume_session", "sessionId": "p", "agentbusSessionId": permission, "lastEventId": lastSeen})
		assert.Equal(t, "resumed", m.field("status"))
		end := again.waitFor("the result", of("result", "p"))
		denied := again.waitFor("the denied result", of("tool_result", "p", "Session closed"))
		assert.Contains(t, denied.Raw, `"isError":true`)

		whole := dialAs(t, path, token)
		whole.mustCall("all", map[string]any{"type": "resume_session", "sessionId": "p", "agentbusSessionId": permission})
		whole.waitFor("the same result", func(m doorMsg) bool { return m.EventID == end.EventID })
		var joined, all []uint64
		for _, m := range append(feedOf(c.all(), "p"), feedOf(again.all(), "p")...) {
			if m.EventID <= end.EventID {
				joined = append(joined, m.EventID)
			}
		}
		for _, m := range feedOf(whole.all(), "p") {
			if m.EventID <= end.EventID {
				all = append(all, m.EventID)
			}
		}
		assert.Equal(t, all, joined)
	})

	t.Run("too many lines at once are answered rate_limited", func(t *testing.T) {
		flood := dialAs(t, path, token)
		for range 100 {
			flood.sendLine([]byte(`{"type":"bogus"}`))
		}
		flood.waitFor("rate_limited", func(m doorMsg) bool { return m.Type == "error" && m.field("kind") == "rate_limited" })
	})

	t.Run("socat speaks the protocol", func(t *testing.T) {
		lines := socat(t, path, nil, authLine(token), `{"type":"start_session","sessionId":"s","prompt":"Say hello","cwd":"socat","budgetCapUsd":5}`)
		lines.waitFor("the session's text", of("assistant_text", "s", "I'll start by looking at the project"))
		lines.waitFor("its result", of("result", "s"))
	})

	t.Run("a token acts for its user only", func(t *testing.T) {
		other := uuid.NewString()
		otherToken, err := api.NewToken(runtimeSecret, other, time.Hour)
		require.NoError(t, err)
		c := dialSocket(t, path)
		m := c.call("who", map[string]any{"type": "authenticate", "token": otherToken})
		require.Equal(t, "authenticated", m.Type, m.Raw)
		assert.Equal(t, other, m.field("userId"))
		m = c.call("theirs", map[string]any{"type": "resume_session", "sessionId": "p", "agentbusSessionId": permission})
		require.Equal(t, "error", m.Type, m.Raw)
		assert.Equal(t, "not_found", m.field("kind"), "another user's session is not there")
		m = c.call("again", map[string]any{"type": "authenticate", "token": token})
		require.Equal(t, "error", m.Type, m.Raw)
		assert.Contains(t, m.field("message"), "already authenticated", "a connection keeps its user")
		m = c.call("still", map[string]any{"type": "resume_session", "sessionId": "p2", "agentbusSessionId": permission})
		assert.Equal(t, "not_found", m.field("kind"), m.Raw)
	})

	t.Run("a uid the operator mapped acts for its user without a token", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("connecting as another user needs root")
		}
		require.NoError(t, os.Chmod(filepath.Dir(path), 0o711))
		require.NoError(t, os.Chmod(path, 0o666))
		defer os.Chmod(path, 0o600)
		lines := socat(t, path, &syscall.Credential{Uid: mappedUID, Gid: mappedUID},
			`{"type":"start_session","sessionId":"m","prompt":"Say hello","cwd":"mapped","budgetCapUsd":5,"requestId":"m"}`,
			`{"type":"resume_session","sessionId":"p","agentbusSessionId":"`+permission+`","requestId":"theirs"}`)
		started := lines.waitFor("started", of("session_status", "m", `"status":"started"`))
		mappedToken, err := api.NewToken(runtimeSecret, mappedUser, time.Hour)
		require.NoError(t, err)
		mapped := &uptest.Client{T: t, Base: u.base, Token: mappedToken, Redis: u.redis, Wait: 2 * wait}
		var s struct {
			ID string `json:"id"`
		}
		mapped.Must(http.MethodGet, "/api/agents/sessions/"+started.field("agentbusSessionId"), nil, &s)
		assert.Equal(t, started.field("agentbusSessionId"), s.ID, "the session is the mapped user's")
		m := lines.waitFor("the refusal", replyTo("theirs"))
		assert.Equal(t, "not_found", m.field("kind"), "and only the mapped user's")
	})

	t.Run("only the socket's owner and the mapped uids may connect", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("connecting as another user needs root")
		}
		// Open the file to everyone: SO_PEERCRED alone must refuse the peer.
		require.NoError(t, os.Chmod(filepath.Dir(path), 0o711))
		require.NoError(t, os.Chmod(path, 0o666))
		defer os.Chmod(path, 0o600)
		// It sends nothing: the refusal comes unasked, and a line written
		// after it would only meet the closed connection.
		lines := socat(t, path, &syscall.Credential{Uid: otherUID, Gid: otherUID})
		m := lines.waitFor("the refusal", of("error", ""))
		assert.Equal(t, "forbidden", m.field("kind"))
		lines.waitFor("the end of the connection", func(doorMsg) bool {
			lines.mu.Lock()
			defer lines.mu.Unlock()
			return lines.closed != nil
		})
		assert.Len(t, lines.all(), 1, "nothing but the refusal")
	})

	t.Run("up stops while a client is connected, and closes it", func(t *testing.T) {
		idle := dialAs(t, path, token)
		idle.mustCall("follow", map[string]any{"type": "resume_session", "sessionId": "p", "agentbusSessionId": permission})
		u.stop()
		idle.waitFor("the end of the connection", func(doorMsg) bool {
			idle.mu.Lock()
			defer idle.mu.Unlock()
			return idle.closed != nil
		})
		_, err := os.Stat(path)
		assert.ErrorIs(t, err, os.ErrNotExist, "the socket file is gone")
	})
}

// socat runs `socat - UNIX-CONNECT:path` (as cred's user when set),
// writes lines to it and returns what it prints.
func socat(t *testing.T, path string, cred *syscall.Credential, lines ...string) *msgLog {
	t.Helper()
	bin, err := exec.LookPath("socat")
	require.NoError(t, err, "socat is needed (make deps installs it)")
	cmd := exec.Command(bin, "-", "UNIX-CONNECT:"+path)
	cmd.Stderr = os.Stderr
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	log := newMsgLog(t)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			log.add(append([]byte(nil), sc.Bytes()...))
		}
		log.end(cmd.Wait())
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
	})
	for _, l := range lines {
		_, err := io.WriteString(stdin, l+"\n")
		require.NoError(t, err)
	}
	return log
}

// TestSocketCommandServesARunningDeployment runs `agentbus socket`
// against up's API: it prints the ready line, refuses a connection without
// a token the API accepts, and socat drives a session through it with a
// token; with --token-for-uid, a peer of that uid acts with
// AGENTBUS_TOKEN without one.
func TestSocketCommandServesARunningDeployment(t *testing.T) {
	u := startUpWithRuntime(t, "--socket", "off")
	dir, err := testenv.TempDir("socket-cmd")
	require.NoError(t, err)
	serve := func(name string, env []string, args ...string) string {
		path := filepath.Join(dir, name)
		cmd := exec.Command(os.Args[0], append([]string{"socket", "--api", u.base, "--socket", path}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		})
		first, err := bufio.NewReader(stdout).ReadString('\n')
		require.NoError(t, err)
		assert.JSONEq(t, fmt.Sprintf(`{"status":"ready","socketPath":%q}`, path), first)
		return path
	}
	// AGENTBUS_TOKEN in the environment gives a connection nothing.
	path := serve("agent.sock", []string{"AGENTBUS_TOKEN=" + u.token})

	t.Run("a connection without a token the API accepts is refused", func(t *testing.T) {
		for name, first := range map[string]string{
			"no token":  `{"type":"start_session","sessionId":"s","prompt":"Say hello","cwd":"remote","budgetCapUsd":5}`,
			"bad token": authLine("not.a.jwt"),
		} {
			lines := socat(t, path, nil, first)
			m := lines.waitFor(name+": the refusal", of("error", ""))
			assert.Equal(t, "unauthorized", m.field("kind"), name)
			lines.waitFor(name+": the end of the connection", closedLog(lines))
		}
	})

	lines := socat(t, path, nil, authLine(u.token), `{"type":"start_session","sessionId":"s","prompt":"Pick a database [scenario:question]","cwd":"remote","budgetCapUsd":5}`)
	lines.waitFor("authenticated", func(m doorMsg) bool { return m.Type == "authenticated" })
	started := lines.waitFor("started", of("session_status", "s", `"status":"started"`))
	lines.waitFor("the question", of("question", "s", "Which database"))
	u.Must(http.MethodPost, "/api/agents/sessions/"+started.field("agentbusSessionId")+"/answer", map[string]any{"answer": "SQLite"}, nil)
	lines.waitFor("the answer's text", of("assistant_text", "s", "Going with SQLite."))
	lines.waitFor("the result", of("result", "s"))

	t.Run("a uid given --token-for-uid acts with AGENTBUS_TOKEN", func(t *testing.T) {
		mapped := serve("mapped.sock", []string{"AGENTBUS_TOKEN=" + u.token}, "--token-for-uid", fmt.Sprint(os.Getuid()))
		lines := socat(t, mapped, nil, `{"type":"resume_session","sessionId":"s","agentbusSessionId":"`+started.field("agentbusSessionId")+`","requestId":"r"}`)
		m := lines.waitFor("resumed", replyTo("r"))
		assert.Equal(t, "resumed", m.field("status"), m.Raw)
	})
}
