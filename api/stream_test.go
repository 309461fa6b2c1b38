package api

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
)

// fakeOwners knows whose each session is.
type fakeOwners map[uuid.UUID]string

func (f fakeOwners) Owner(_ context.Context, id uuid.UUID) (string, error) {
	owner, ok := f[id]
	if !ok {
		return "", ErrSessionNotFound
	}
	return owner, nil
}

type streamEnv struct {
	js     jetstream.JetStream
	server *Server
	http   *httptest.Server
}

func newStreamEnv(t *testing.T, cfg Config, owners fakeOwners, wrap func(*httptest.Server)) *streamEnv {
	t.Helper()
	_, js, _ := bustest.Server(t)
	s := newServer(t, cfg, Deps{JetStream: js, SessionOwners: owners})
	hs := httptest.NewUnstartedServer(s)
	if wrap != nil {
		wrap(hs)
	}
	hs.Start()
	t.Cleanup(hs.Close)
	return &streamEnv{js: js, server: s, http: hs}
}

// publish puts one session event on AGENTS_EVENTS and returns its sequence.
func (e *streamEnv) publish(t *testing.T, session uuid.UUID, owner, typ string, data any) uint64 {
	t.Helper()
	env, err := bus.NewEnvelope(typ, "session", session.String(), 1, owner, data)
	require.NoError(t, err)
	msg, err := bus.NewMsg(context.Background(), bus.EventSubject("session", session.String(), typ), env)
	require.NoError(t, err)
	ack, err := e.js.PublishMsg(context.Background(), msg)
	require.NoError(t, err)
	return ack.Sequence
}

func (e *streamEnv) open(t *testing.T, path, user string, header http.Header) (*http.Response, <-chan sseEvent) {
	t.Helper()
	tok := ""
	if user != "" {
		var err error
		tok, err = NewToken(testSecret, user, time.Hour)
		require.NoError(t, err)
	}
	return openStream(t, e.http.Client(), e.http.URL+path, tok, header)
}

// waitOpen waits for the ping that says the stream is subscribed.
func waitOpen(t *testing.T, ch <-chan sseEvent) {
	t.Helper()
	ev := nextAny(t, ch, 10*time.Second)
	require.Equal(t, "ping", ev.Event)
}

func eventOf(t *testing.T, ev sseEvent) StreamEvent {
	t.Helper()
	require.Equal(t, "event", ev.Event, ev.Data)
	var se StreamEvent
	require.NoError(t, json.Unmarshal([]byte(ev.Data), &se))
	return se
}

func seqOf(t *testing.T, ev sseEvent) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(ev.ID, 10, 64)
	require.NoError(t, err, "event id %q", ev.ID)
	return n
}

func TestSessionStreamResume(t *testing.T) {
	t.Parallel()
	sess, other := uuid.New(), uuid.New()
	e := newStreamEnv(t, Config{}, fakeOwners{sess: "alice", other: "alice"}, nil)
	before := time.Now().Add(-time.Second)
	old := e.publish(t, sess, "alice", "session_started", map[string]any{"n": 0})

	path := "/api/agents/sessions/" + sess.String() + "/stream"
	resp, ch := e.open(t, path, "alice", nil)
	require.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	waitOpen(t, ch)

	var live []uint64
	for i := 1; i <= 3; i++ {
		live = append(live, e.publish(t, sess, "alice", "activity_recorded", map[string]any{"n": i}))
		e.publish(t, other, "alice", "activity_recorded", map[string]any{"other": i})
	}
	for i, want := range live {
		ev := next(t, ch, 10*time.Second)
		require.Equal(t, want, seqOf(t, ev), "without Last-Event-ID only new events come (not %d)", old)
		se := eventOf(t, ev)
		assert.Equal(t, "activity_recorded", se.Type)
		assert.Equal(t, sess.String(), se.AggregateID)
		assert.Equal(t, "session", se.Aggregate)
		assert.JSONEq(t, `{"n":`+strconv.Itoa(i+1)+`}`, string(se.Data))
	}
	lastID := strconv.FormatUint(live[2], 10)

	// The connection drops; events go on meanwhile.
	require.NoError(t, resp.Body.Close())
	var missed []uint64
	for i := 4; i <= 8; i++ {
		missed = append(missed, e.publish(t, sess, "alice", "activity_recorded", map[string]any{"n": i}))
		e.publish(t, other, "alice", "activity_recorded", map[string]any{"other": i})
	}

	resp2, ch2 := e.open(t, path, "alice", http.Header{"Last-Event-Id": {lastID}})
	require.Equal(t, 200, resp2.StatusCode)
	for i, want := range missed {
		ev := next(t, ch2, 10*time.Second)
		require.Equal(t, want, seqOf(t, ev), "resumed event %d", i)
		assert.JSONEq(t, `{"n":`+strconv.Itoa(i+4)+`}`, string(eventOf(t, ev).Data))
	}
	liveAgain := e.publish(t, sess, "alice", "session_paused", map[string]any{"status": "Paused"})
	ev := next(t, ch2, 10*time.Second)
	assert.Equal(t, liveAgain, seqOf(t, ev), "then live events, nothing repeated")
	assert.Equal(t, "session_paused", eventOf(t, ev).Type)

	t.Run("since", func(t *testing.T) {
		_, ch := e.open(t, path+"?since="+url.QueryEscape(before.UTC().Format(time.RFC3339Nano)), "alice", nil)
		waitOpen(t, ch)
		want := append(append(append([]uint64{old}, live...), missed...), liveAgain)
		for _, w := range want {
			require.Equal(t, w, seqOf(t, next(t, ch, 10*time.Second)))
		}
	})
}

func TestAllSessionsStream(t *testing.T) {
	t.Parallel()
	a1, a2, b1 := uuid.New(), uuid.New(), uuid.New()
	e := newStreamEnv(t, Config{}, fakeOwners{a1: "alice", a2: "alice", b1: "bob"}, nil)

	_, alice := e.open(t, "/api/agents/stream", "alice", nil)
	_, bob := e.open(t, "/api/agents/stream", "bob", nil)
	waitOpen(t, alice)
	waitOpen(t, bob)

	var aliceSeqs, bobSeqs []uint64
	for i := range 3 {
		aliceSeqs = append(aliceSeqs, e.publish(t, a1, "alice", "activity_recorded", map[string]any{"n": i}))
		bobSeqs = append(bobSeqs, e.publish(t, b1, "bob", "activity_recorded", map[string]any{"n": i}))
		aliceSeqs = append(aliceSeqs, e.publish(t, a2, "alice", "activity_recorded", map[string]any{"n": i}))
	}
	for _, want := range aliceSeqs {
		ev := next(t, alice, 10*time.Second)
		require.Equal(t, want, seqOf(t, ev))
		assert.NotEqual(t, b1.String(), eventOf(t, ev).AggregateID)
	}
	for _, want := range bobSeqs {
		ev := next(t, bob, 10*time.Second)
		require.Equal(t, want, seqOf(t, ev))
		assert.Equal(t, b1.String(), eventOf(t, ev).AggregateID)
	}

	t.Run("resume skips other owners", func(t *testing.T) {
		_, ch := e.open(t, "/api/agents/stream", "alice", http.Header{"Last-Event-Id": {strconv.FormatUint(aliceSeqs[1], 10)}})
		waitOpen(t, ch)
		for _, want := range aliceSeqs[2:] {
			require.Equal(t, want, seqOf(t, next(t, ch, 10*time.Second)))
		}
	})
}

func TestStreamAccess(t *testing.T) {
	t.Parallel()
	sess := uuid.New()
	e := newStreamEnv(t, Config{}, fakeOwners{sess: "alice"}, nil)
	tests := []struct {
		name   string
		path   string
		user   string
		header http.Header
		status int
	}{
		{name: "owner", path: "/api/agents/sessions/" + sess.String() + "/stream", user: "alice", status: 200},
		{name: "another owner's session", path: "/api/agents/sessions/" + sess.String() + "/stream", user: "bob", status: 404},
		{name: "unknown session", path: "/api/agents/sessions/" + uuid.NewString() + "/stream", user: "alice", status: 404},
		{name: "not a uuid", path: "/api/agents/sessions/nope/stream", user: "alice", status: 422},
		{name: "no token", path: "/api/agents/sessions/" + sess.String() + "/stream", status: 401},
		{name: "all sessions without token", path: "/api/agents/stream", status: 401},
		{name: "negative Last-Event-ID", path: "/api/agents/stream", user: "alice", header: http.Header{"Last-Event-Id": {"-4"}}, status: 422},
		{name: "bad since", path: "/api/agents/stream?since=yesterday", user: "alice", status: 422},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, _ := e.open(t, tt.path, tt.user, tt.header)
			require.Equal(t, tt.status, resp.StatusCode)
			if tt.status != 200 {
				assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
			}
		})
	}

	t.Run("no bus", func(t *testing.T) {
		s := newServer(t, Config{}, Deps{SessionOwners: fakeOwners{sess: "alice"}})
		resp := testAPI(t, s).Get("/api/agents/sessions/"+sess.String()+"/stream", bearer(t, "alice"))
		require.Equal(t, 503, resp.Code)
		assert.Equal(t, "application/problem+json", resp.Header().Get("Content-Type"))
	})
	t.Run("no session owners", func(t *testing.T) {
		s := newServer(t, Config{}, Deps{JetStream: e.js})
		resp := testAPI(t, s).Get("/api/agents/sessions/"+sess.String()+"/stream", bearer(t, "alice"))
		require.Equal(t, 404, resp.Code)
	})
}

func TestStreamHeartbeat(t *testing.T) {
	t.Parallel()
	sess := uuid.New()
	e := newStreamEnv(t, Config{HeartbeatInterval: 100 * time.Millisecond}, fakeOwners{sess: "alice"}, nil)
	_, ch := e.open(t, "/api/agents/sessions/"+sess.String()+"/stream", "alice", nil)
	waitOpen(t, ch)
	for range 3 {
		ev := nextAny(t, ch, 2*time.Second)
		require.Equal(t, "ping", ev.Event)
		assert.Empty(t, ev.ID, "a ping does not move the resume position")
		var p StreamPing
		require.NoError(t, json.Unmarshal([]byte(ev.Data), &p))
		assert.WithinDuration(t, time.Now(), p.Time, 5*time.Second)
	}
}

// TestStreamPingsFollowTheirInterval: past the ping that opens a stream, a
// ping waits for its interval, so an interval longer than the test sends
// none (a check that a slow machine cannot fail).
func TestStreamPingsFollowTheirInterval(t *testing.T) {
	t.Parallel()
	sess := uuid.New()
	e := newStreamEnv(t, Config{HeartbeatInterval: time.Hour}, fakeOwners{sess: "alice"}, nil)
	_, ch := e.open(t, "/api/agents/sessions/"+sess.String()+"/stream", "alice", nil)
	waitOpen(t, ch)
	select {
	case ev := <-ch:
		t.Fatalf("a %q came before its interval of an hour", ev.Event)
	case <-time.After(500 * time.Millisecond):
	}
}

// smallBuffers shrinks the socket buffers of every accepted connection, so
// a client that stops reading blocks the server's writes at once.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// newSlowClientEnv serves sess's stream to alice with a buffer of 4 items
// and the given SlowClientTimeout, over connections whose socket buffers
// are small, and returns a client that reads slowly enough to fall behind.
func newSlowClientEnv(t *testing.T, sess uuid.UUID, timeout time.Duration) (*streamEnv, *http.Client) {
	t.Helper()
	e := newStreamEnv(t, Config{StreamBuffer: 4, SlowClientTimeout: timeout}, fakeOwners{sess: "alice"}, func(hs *httptest.Server) {
		hs.Listener = smallBuffers{hs.Listener}
	})
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetReadBuffer(4096)
			}
			return c, err
		},
	}}
	return e, client
}

func TestStreamSlowClientReconnects(t *testing.T) {
	t.Parallel()
	sess := uuid.New()
	e, client := newSlowClientEnv(t, sess, 100*time.Millisecond)
	tok, err := NewToken(testSecret, "alice", time.Hour)
	require.NoError(t, err)
	path := e.http.URL + "/api/agents/sessions/" + sess.String() + "/stream"
	_, ch := openStream(t, client, path, tok, nil)
	waitOpen(t, ch)

	// The client reads nothing while 40 large events are published: the
	// bus does not wait for it.
	big := strings.Repeat("x", 32<<10)
	var seqs []uint64
	start := time.Now()
	for i := range 40 {
		seqs = append(seqs, e.publish(t, sess, "alice", "assistant_message", map[string]any{"n": i, "text": big}))
	}
	publishTime := time.Since(start)
	time.Sleep(300 * time.Millisecond)

	// Now it reads: what was delivered, then reconnect with the last id.
	var got []uint64
	var reconnect sseEvent
	for reconnect.Event == "" {
		ev := next(t, ch, 10*time.Second)
		if ev.Event == "reconnect" {
			reconnect = ev
			break
		}
		got = append(got, seqOf(t, ev))
	}
	require.Less(t, len(got), len(seqs), "the stream gave up before it delivered everything")
	require.Equal(t, seqs[:len(got)], got, "in order, nothing skipped")
	var rc StreamReconnect
	require.NoError(t, json.Unmarshal([]byte(reconnect.Data), &rc))
	assert.Equal(t, "slow_client", rc.Reason)
	resume := seqs[0] - 1
	if len(got) > 0 {
		resume = got[len(got)-1]
	}
	assert.Equal(t, strconv.FormatUint(resume, 10), rc.LastEventID)
	assert.Equal(t, rc.LastEventID, reconnect.ID, "the SSE id makes EventSource resume there")
	_, open := <-ch
	assert.False(t, open, "the stream closes after reconnect")
	t.Logf("published 40 x 32 KiB in %s; %d delivered before the reconnect", publishTime, len(got))

	// Resuming from there delivers the rest, once each, following any
	// further reconnect as a browser would.
	var rest []uint64
	last := rc.LastEventID
	for attempt := 0; len(rest) < len(seqs)-len(got); attempt++ {
		require.Less(t, attempt, 20, "too many reconnects")
		_, ch := e.open(t, "/api/agents/sessions/"+sess.String()+"/stream", "alice", http.Header{"Last-Event-Id": {last}})
		waitOpen(t, ch)
		for len(rest) < len(seqs)-len(got) {
			ev := next(t, ch, 10*time.Second)
			last = ev.ID
			if ev.Event == "reconnect" {
				break
			}
			rest = append(rest, seqOf(t, ev))
		}
	}
	require.Equal(t, seqs[len(got):], rest)
}

func TestResumePoint(t *testing.T) {
	t.Parallel()
	assert.EqualValues(t, 7, resumePoint(7, 3))
	assert.EqualValues(t, 2, resumePoint(0, 3))
	assert.EqualValues(t, 0, resumePoint(0, 0))
	msg := reconnectMessage(0, "slow_client")
	assert.Zero(t, msg.ID)
	assert.Equal(t, StreamReconnect{Reason: "slow_client"}, msg.Data)
}

// publishChain puts one chain event on AGENTS_EVENTS and returns its sequence.
func (e *streamEnv) publishChain(t *testing.T, chain uuid.UUID, owner, typ string, data map[string]any) uint64 {
	t.Helper()
	data["chainId"] = chain.String()
	env, err := bus.NewEnvelope(typ, "chain", chain.String(), 1, owner, data)
	require.NoError(t, err)
	msg, err := bus.NewMsg(context.Background(), bus.EventSubject("chain", chain.String(), typ), env)
	require.NoError(t, err)
	ack, err := e.js.PublishMsg(context.Background(), msg)
	require.NoError(t, err)
	return ack.Sequence
}

func TestSessionStreamCarriesItsChain(t *testing.T) {
	t.Parallel()
	sess, successor, stranger := uuid.New(), uuid.New(), uuid.New()
	e := newStreamEnv(t, Config{}, fakeOwners{sess: "alice", stranger: "alice"}, nil)
	path := "/api/agents/sessions/" + sess.String() + "/stream"
	_, ch := e.open(t, path, "alice", nil)
	waitOpen(t, ch)

	chain, otherChain := uuid.New(), uuid.New()
	foreign := e.publishChain(t, otherChain, "alice", "session_chain_created", map[string]any{"firstSessionId": stranger.String()})
	want := []uint64{
		e.publishChain(t, chain, "alice", "session_chain_created", map[string]any{"firstSessionId": sess.String(), "originalObjective": "Migrate"}),
		e.publishChain(t, chain, "alice", "session_handoff_initiated", map[string]any{"fromSessionId": sess.String(), "handoffDocumentId": uuid.NewString()}),
		e.publishChain(t, chain, "alice", "session_added_to_chain", map[string]any{"newSessionId": successor.String(), "position": 2}),
	}
	e.publishChain(t, otherChain, "alice", "session_chain_completed", map[string]any{"totalSessions": 1, "totalCostUsd": 0})
	want = append(want, e.publish(t, sess, "alice", "session_paused", map[string]any{"status": "Paused"}))

	var got []StreamEvent
	for _, w := range want {
		ev := next(t, ch, 10*time.Second)
		require.Equal(t, w, seqOf(t, ev), "only the events of the session and its chain, in order")
		got = append(got, eventOf(t, ev))
	}
	assert.Equal(t, []string{"session_chain_created", "session_handoff_initiated", "session_added_to_chain", "session_paused"},
		[]string{got[0].Type, got[1].Type, got[2].Type, got[3].Type})
	assert.Equal(t, "chain", got[2].Aggregate)
	assert.Contains(t, string(got[2].Data), successor.String(), "the session that continues the chain")

	// Without a read side to say which chain the session is in, a resumed
	// stream learns it again from the first event that names the session.
	t.Run("resume after a chain event", func(t *testing.T) {
		_, ch := e.open(t, path, "alice", http.Header{"Last-Event-Id": {strconv.FormatUint(want[0], 10)}})
		waitOpen(t, ch)
		for _, w := range want[1:] {
			require.Equal(t, w, seqOf(t, next(t, ch, 10*time.Second)))
		}
	})
	t.Run("another chain's event is no resume point", func(t *testing.T) {
		resp, _ := e.open(t, path, "alice", http.Header{"Last-Event-Id": {strconv.FormatUint(foreign, 10)}})
		assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	})
	t.Run("the taskbar stream carries the owner's chains", func(t *testing.T) {
		_, ch := e.open(t, "/api/agents/stream", "alice", http.Header{"Last-Event-Id": {strconv.FormatUint(foreign-1, 10)}})
		waitOpen(t, ch)
		assert.Equal(t, foreign, seqOf(t, next(t, ch, 10*time.Second)))
	})
}
