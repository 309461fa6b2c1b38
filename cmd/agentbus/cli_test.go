package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/uptest"
)

// buildAgentbus builds this binary, as users run it, into a temporary
// directory and returns its path.
func buildAgentbus(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "agentbus")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// cliUnderTest runs the built binary against one API as one user.
type cliUnderTest struct {
	t     *testing.T
	bin   string
	api   string
	token string
}

// cliResult is what one run of the command line printed and its exit code.
type cliResult struct {
	stdout, stderr string
	code           int
}

func (c *cliUnderTest) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Env = append(os.Environ(), "AGENTBUS_API="+c.api, "AGENTBUS_TOKEN="+c.token)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

func (c *cliUnderTest) run(args ...string) cliResult {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := c.command(ctx, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		require.NoError(c.t, err, "agentbus %v", args)
	}
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}

// must runs a command that must succeed and returns what it printed.
func (c *cliUnderTest) must(args ...string) string {
	c.t.Helper()
	r := c.run(args...)
	require.Equal(c.t, 0, r.code, "agentbus %v: %s%s", args, r.stdout, r.stderr)
	return r.stdout
}

// fails runs a command that must fail with the exit code code and say
// message on stderr.
func (c *cliUnderTest) fails(code int, message string, args ...string) {
	c.t.Helper()
	r := c.run(args...)
	assert.Equal(c.t, code, r.code, "the exit code of agentbus %v: %s%s", args, r.stdout, r.stderr)
	assert.Contains(c.t, r.stderr, message, "agentbus %v", args)
	assert.Empty(c.t, r.stdout, "agentbus %v prints its failure on stderr only", args)
}

// id returns the one line a command printed, which must be a UUID.
func (c *cliUnderTest) id(args ...string) string {
	c.t.Helper()
	out := strings.TrimSpace(c.must(args...))
	_, err := uuid.Parse(out)
	require.NoError(c.t, err, "agentbus %v printed %q, not an id", args, out)
	return out
}

// TestCLI runs each `agentbus sessions` and `agentbus pool` subcommand,
// built as users run it, against up and its real runtime: once as it
// should be used and once as it should not, reading the exit code and
// the message.
func TestCLI(t *testing.T) {
	bin := buildAgentbus(t)
	u := startUpWithRuntime(t)

	t.Run("usage, credentials and an unreachable API", func(t *testing.T) {
		c := &cliUnderTest{t: t, bin: bin, api: u.base, token: u.token}
		assert.Contains(t, c.must("sessions", "help"), "4  conflict")
		c.fails(2, `unknown subcommand "list"`, "sessions", "list")
		c.fails(2, "sessions show ID: want 1 argument, got 0", "sessions", "show")
		c.fails(2, "flag provided but not defined: -bogus", "sessions", "ls", "--bogus")
		c.fails(6, "Unauthorized", "sessions", "ls", "--token", "not-a-token")
		c.token = ""
		c.fails(6, "Unauthorized", "pool")
		c.fails(1, "cannot reach the API", "sessions", "ls", "--api", "127.0.0.1:1")
	})

	t.Run("a question answered, the session steered, approved and watched", func(t *testing.T) {
		c := &cliUnderTest{t: t, bin: bin, api: u.base, token: u.token}
		id := c.id("sessions", "start", "Pick a database [scenario:question]", "--dir", "cli-question", "--budget", "5")
		c.fails(5, "body.workingDirectory", "sessions", "start", "Escape", "--dir", "/", "--budget", "1")
		u.waitStatus(id, "WaitingForInput")

		ls := c.must("sessions", "ls", "--status", "WaitingForInput")
		assert.Regexp(t, `(?m)^ID\s+NAME\s+STATUS\s+COST\s+CONTEXT\s+TURNS\s+CREATED$`, ls)
		assert.Regexp(t, `(?m)^`+id+`\s+Pick a database \[scenario:question\]\s+WaitingForInput\s+\$`, ls)
		var list struct {
			Items []struct{ ID, Status string } `json:"items"`
		}
		require.NoError(t, json.Unmarshal([]byte(c.must("sessions", "ls", "--json")), &list))
		assert.Contains(t, list.Items, struct{ ID, Status string }{id, "WaitingForInput"})
		c.fails(5, "query.status", "sessions", "ls", "--status", "Sleeping")

		show := c.must("sessions", "show", id)
		assert.Regexp(t, `(?m)^Status\s+WaitingForInput$`, show)
		assert.Regexp(t, `(?m)^Question\s+Which database should the service use\? \[PostgreSQL \| SQLite\]$`, show)
		var detail uptest.Session
		require.NoError(t, json.Unmarshal([]byte(c.must("sessions", "show", id, "--json")), &detail))
		assert.Equal(t, id, detail.ID)
		c.fails(3, "Not Found", "sessions", "show", uuid.NewString())
		c.fails(5, "path.id", "sessions", "show", "not-an-id")

		assert.Equal(t, id+" Running\n", c.must("sessions", "answer", id, "PostgreSQL"))
		c.fails(4, "Conflict", "sessions", "answer", id, "SQLite")
		u.waitReview(id)

		turns := u.Session(id).Metrics.TurnCount
		steered := c.id("sessions", "steer", id, "Now say goodbye")
		u.WaitDelivered(id, steered)
		c.fails(3, "Not Found", "sessions", "steer", uuid.NewString(), "Hello?")
		u.WaitFor(id, "Idle awaiting review after the steer", func(s uptest.Session) bool {
			return s.Status == "Idle" && s.HasPendingReview && s.Metrics.TurnCount > turns
		})
		turns = u.Session(id).Metrics.TurnCount
		queued := c.id("sessions", "queue", id, "Use the standard library only")
		u.WaitDelivered(id, queued)
		queue := c.must("sessions", "queue", id)
		assert.Regexp(t, `(?m)^SEQ\s+MESSAGE\s+PRIORITY\s+STATUS\s+SOURCE\s+CONTENT$`, queue)
		assert.Regexp(t, `(?m)^\d+\s+`+steered+`\s+Immediate\s+Delivered\s+User\s+Now say goodbye$`, queue)
		assert.Regexp(t, `(?m)^\d+\s+`+queued+`\s+Queued\s+Delivered\s+User\s+Use the standard library only$`, queue)
		c.fails(3, "Not Found", "sessions", "queue", uuid.NewString())
		u.WaitFor(id, "Idle awaiting review after the queued message", func(s uptest.Session) bool {
			return s.Status == "Idle" && s.HasPendingReview && s.Metrics.TurnCount > turns
		})

		assert.Equal(t, id+" Completed\n", c.must("sessions", "approve", id))
		c.fails(4, "AgentSession is Completed", "sessions", "approve", id)
		c.fails(4, "AgentSession is Completed", "sessions", "steer", id, "One more thing")

		// The session is Completed: watch shows its whole history and ends.
		watched := c.must("sessions", "watch", id)
		for _, line := range []string{
			`assistant  Before I change the storage layer I need one decision from you.`,
			`→ AskUserQuestion Which database should the service use? [PostgreSQL | SQLite]`,
			`● session waiting for input expiresAt=`,
			`options=[PostgreSQL | SQLite] questionContent="Which database should the service use?"`,
			`● session input received answer=PostgreSQL byTimeout=false`,
			`← AskUserQuestion ok: User has answered your question: "PostgreSQL".`,
			`assistant  Going with PostgreSQL.`,
			`● message enqueued content="Use the standard library only" messageId=` + queued + ` priority=Queued sessionStatus=`,
			`● agent session approved`,
		} {
			assert.Contains(t, watched, line)
		}
		assert.True(t, strings.HasSuffix(watched, "● agent session approved\n"), "watch ends with the session:\n%s", watched)
		c.fails(3, "Not Found", "sessions", "watch", uuid.NewString())
	})

	t.Run("a long session's queue promoted; paused, resumed, interrupted and cancelled", func(t *testing.T) {
		c := &cliUnderTest{t: t, bin: bin, api: u.base, token: u.token}
		promoted := c.id("sessions", "start", "Run the suite [scenario:long]", "--dir", "cli-promote", "--budget", "5")
		u.waitStatus(promoted, "Running")
		u.waitActivity(promoted, "integration")
		later := c.id("sessions", "queue", promoted, "After the suite, summarise it")
		withdrawn := c.id("sessions", "queue", promoted, "And then delete everything")
		queue := c.must("sessions", "queue", promoted)
		assert.Regexp(t, `(?m)^\d+\s+`+later+`\s+Queued\s+Pending\s+User\s+After the suite`, queue)
		assert.Regexp(t, `(?m)^\d+\s+`+withdrawn+`\s+Queued\s+Pending\s+User\s+And then delete`, queue)
		assert.Regexp(t, `(?m)^\d+\s+`+withdrawn+`\s+Queued\s+Cancelled\s+User\s+And then delete`,
			c.must("sessions", "queue", promoted, "--cancel", withdrawn))
		c.fails(4, "Cancelled", "sessions", "queue", promoted, "--cancel", withdrawn)
		c.fails(2, "TEXT and --cancel exclude each other", "sessions", "queue", promoted, "More", "--cancel", withdrawn)
		assert.Regexp(t, `(?m)^\d+\s+`+later+`\s+Immediate\s+\w+\s+User\s+After the suite`, c.must("sessions", "promote", promoted, later))
		c.fails(3, "Not Found", "sessions", "promote", promoted, uuid.NewString())
		u.WaitDelivered(promoted, later)

		// The sidecar acknowledges a pause at its next safe point, and the
		// minute-long tool call of this scenario has none: pause before it
		// starts, and wait out the tool when that was too late.
		long := c.id("sessions", "start", "Run the suite [scenario:long]", "--dir", "cli-long", "--budget", "5")
		u.waitStatus(long, "Running")
		assert.Equal(t, long+" Pausing\n", c.must("sessions", "pause", long))
		patient := &uptest.Client{T: t, Base: u.base, Token: u.token, Wait: 2*wait + time.Minute}
		patient.WaitFor(long, "Paused", func(s uptest.Session) bool { return s.Status == "Paused" })
		c.fails(4, "AgentSession is Paused", "sessions", "pause", long)
		assert.Equal(t, long+" Resuming\n", c.must("sessions", "resume", long))
		// Running again, or Idle already when the pause came after the tool call.
		u.WaitFor(long, "resumed", func(s uptest.Session) bool { return s.Status == "Running" || s.Status == "Idle" })
		c.fails(4, "Conflict", "sessions", "resume", long)
		assert.Equal(t, long+" Cancelling\n", c.must("sessions", "cancel", long))
		u.waitStatus(long, "Cancelled")
		c.fails(4, "AgentSession is Cancelled", "sessions", "cancel", long)

		// An interrupt cuts the tool call short.
		long = c.id("sessions", "start", "Run the suite [scenario:long]", "--dir", "cli-interrupt", "--budget", "5")
		u.waitStatus(long, "Running")
		u.waitActivity(long, "integration")
		assert.Equal(t, long+" Interrupting\n", c.must("sessions", "interrupt", long))
		u.waitStatus(long, "Interrupted")
		c.fails(4, "AgentSession is Interrupted", "sessions", "interrupt", long)
		c.must("sessions", "cancel", long)
		u.waitStatus(long, "Cancelled")
	})

	t.Run("an output rejected and retried; an idle session closed", func(t *testing.T) {
		c := &cliUnderTest{t: t, bin: bin, api: u.base, token: u.token}
		hello := c.id("sessions", "start", "Say hello", "--dir", "cli-hello", "--budget", "5")
		u.waitReview(hello)
		assert.Equal(t, hello+" Failed\n", c.must("sessions", "reject", hello, "--reason", "Not the greeting I wanted"))
		c.fails(4, "AgentSession is Failed", "sessions", "reject", hello)
		retried := c.must("sessions", "retry", hello, "--instruction", "Greet in French")
		assert.True(t, strings.HasPrefix(retried, hello+" "), retried)
		u.waitReview(hello)
		c.fails(4, "AgentSession is Idle", "sessions", "retry", hello)
		c.fails(4, "Conflict", "sessions", "close", hello)

		// A turn cut short by a sidecar crash leaves the session Idle with
		// nothing to review: that is what close ends.
		idle := c.id("sessions", "start", "Run the suite [scenario:long]", "--dir", "cli-close", "--budget", "5")
		u.waitStatus(idle, "Running")
		pid := u.sidecarPID(idle)
		u.waitActivity(idle, "integration")
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
		u.WaitFor(idle, "Idle without review", func(s uptest.Session) bool { return s.Status == "Idle" && !s.HasPendingReview })
		assert.Equal(t, idle+" Completed\n", c.must("sessions", "close", idle))
	})

	t.Run("pool", func(t *testing.T) {
		c := &cliUnderTest{t: t, bin: bin, api: u.base, token: u.token}
		assert.Regexp(t, `(?m)^RUNNING\s+MAX\s+AVAILABLE\s+USED\n\d+\s+20\s+\d+\s+\d+%$`, c.must("pool"))
		assert.Regexp(t, `(?m)^\d+\s+5\s+\d+\s+\d+%$`, c.must("pool", "--max", "5"))
		var pool struct {
			MaxCount int `json:"maxCount"`
		}
		require.NoError(t, json.Unmarshal([]byte(c.must("pool", "--json")), &pool))
		assert.Equal(t, 5, pool.MaxCount)
		c.fails(5, "body.maxConcurrentSessions", "pool", "--max", "0")
	})

	t.Run("tool uses allowed and denied, a plan rejected and approved", func(t *testing.T) {
		testCLIDecisions(t, u, &cliUnderTest{t: t, bin: bin, api: u.base, token: u.token})
	})

	t.Run("templates and skills created, edited and deactivated", func(t *testing.T) {
		testCLICatalog(t, u, &cliUnderTest{t: t, bin: bin, api: u.base, token: u.token})
	})

	t.Run("watch resumes a dropped connection without gap or repeat", func(t *testing.T) {
		testWatchResumes(t, u, &cliUnderTest{t: t, bin: bin, api: u.base, token: u.token})
	})
}

// testWatchResumes follows a session through a proxy that the test cuts
// while the session is paused and resumed, and compares what watch
// printed with the session's stream read at once afterwards.
func testWatchResumes(t *testing.T, u *upUnderTest, c *cliUnderTest) {
	proxy := startCutProxy(t, strings.TrimPrefix(u.base, "http://"))
	id := c.id("sessions", "start", "Run the suite [scenario:long]", "--dir", "cli-watch", "--budget", "5")

	ctx, cancel := context.WithTimeout(context.Background(), 4*wait)
	defer cancel()
	var stdout, stderr syncBuffer
	watch := c.command(ctx, "sessions", "watch", id, "--json", "--api", proxy.addr(), "--retry-for", "5m")
	watch.Stdout, watch.Stderr = &stdout, &stderr
	require.NoError(t, watch.Start())
	done := make(chan error, 1)
	go func() { done <- watch.Wait() }()

	require.Eventually(t, func() bool { return strings.Contains(stdout.String(), "integration") }, 2*wait, 20*time.Millisecond,
		"watch showed no activity: %s%s", stdout.String(), stderr.String())
	proxy.cut()
	before := strings.Count(stdout.String(), "\n")
	// While watch is cut off, the session is interrupted and sent a message.
	u.Must(http.MethodPost, "/api/agents/sessions/"+id+"/interrupt", nil, nil)
	u.waitStatus(id, "Interrupted")
	u.Enqueue(id, "Report what passed", "Queued")
	assert.Equal(t, before, strings.Count(stdout.String(), "\n"), "nothing reaches watch while the connection is cut")
	proxy.restore()

	require.Eventually(t, func() bool { return strings.Contains(stdout.String(), `"message_enqueued"`) }, 2*wait, 20*time.Millisecond,
		"watch did not resume: %s%s", stdout.String(), stderr.String())
	c.must("sessions", "cancel", id)
	select {
	case err := <-done:
		require.NoError(t, err, "watch ends with the cancelled session: %s", stderr.String())
	case <-ctx.Done():
		t.Fatalf("watch did not end with the session: %s%s", stdout.String(), stderr.String())
	}
	assert.Contains(t, stderr.String(), "the live stream was lost")
	assert.Contains(t, stderr.String(), "resuming after event")

	var watched []string
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var ev struct {
			ID    string          `json:"id"`
			Event string          `json:"event"`
			Data  json.RawMessage `json:"data"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &ev), line)
		if ev.Event == "waiting" {
			continue // the session's state, not an event of its log: it has no id
		}
		watched = append(watched, ev.ID)
	}
	want := sessionStreamIDs(t, u.base, u.token, id, `"session_cancelled"`)
	require.Equal(t, want, watched, "watch printed each event of the session once, in order")
	assert.Greater(t, before, 0)
	assert.Less(t, before, len(watched), "events came after the cut")
}

// sessionStreamIDs reads the session's stream from its beginning, directly
// from the API, up to the first event whose data holds until, and returns
// the SSE ids of its events.
func sessionStreamIDs(t *testing.T, base, token, id, until string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/agents/sessions/"+id+"/stream", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Last-Event-ID", "0")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var ids []string
	var evID, name, data string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			evID = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "":
			if name != "ping" && name != "waiting" && data != "" {
				require.NotEqual(t, "reconnect", name)
				ids = append(ids, evID)
				if strings.Contains(data, until) {
					return ids
				}
			}
			evID, name, data = "", "", ""
		}
	}
	t.Fatalf("the stream ended before %s: %v", until, sc.Err())
	return nil
}

// cutProxy forwards TCP connections to a target until it is cut: then it
// drops every open connection and refuses new ones until restored.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  []net.Conn
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln, target: target}
	t.Cleanup(func() {
		_ = ln.Close()
		p.cut()
	})
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(conn)
		}
	}()
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) forward(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		_ = client.Close()
		_ = server.Close()
		return
	}
	p.conns = append(p.conns, client, server)
	p.mu.Unlock()
	go func() {
		_, _ = io.Copy(server, client)
		_ = server.Close()
	}()
	_, _ = io.Copy(client, server)
	_ = client.Close()
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func (p *cutProxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// syncBuffer is a buffer a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
