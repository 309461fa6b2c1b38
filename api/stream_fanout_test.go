package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
)

func TestStreamsShareOneConsumer(t *testing.T) {
	t.Parallel()
	s1, s2 := uuid.New(), uuid.New()
	e := newStreamEnv(t, Config{}, fakeOwners{s1: "alice", s2: "alice"}, nil)
	stream, err := e.js.Stream(context.Background(), bus.StreamEvents)
	require.NoError(t, err)
	info, err := stream.Info(context.Background())
	require.NoError(t, err)
	before := info.State.Consumers
	_, a := e.open(t, "/api/agents/sessions/"+s1.String()+"/stream", "alice", nil)
	_, b := e.open(t, "/api/agents/sessions/"+s1.String()+"/stream", "alice", nil)
	_, c := e.open(t, "/api/agents/sessions/"+s2.String()+"/stream", "alice", nil)
	_, all := e.open(t, "/api/agents/stream", "alice", nil)
	for _, ch := range []<-chan sseEvent{a, b, c, all} {
		waitOpen(t, ch)
	}

	info, err = stream.Info(context.Background())
	require.NoError(t, err)
	assert.Equal(t, before+1, info.State.Consumers, "four live streams read AGENTS_EVENTS through one consumer")

	first := e.publish(t, s1, "alice", "session_paused", map[string]any{"status": "Paused"})
	second := e.publish(t, s2, "alice", "session_paused", map[string]any{"status": "Paused"})
	third := e.publish(t, s1, "alice", "session_resumed", map[string]any{"status": "Running"})
	for _, ch := range []<-chan sseEvent{a, b} {
		assert.Equal(t, first, seqOf(t, next(t, ch, 10*time.Second)))
		assert.Equal(t, third, seqOf(t, next(t, ch, 10*time.Second)), "only the session's own events")
	}
	assert.Equal(t, second, seqOf(t, next(t, c, 10*time.Second)))
	for _, want := range []uint64{first, second, third} {
		assert.Equal(t, want, seqOf(t, next(t, all, 10*time.Second)))
	}
}

// A stream that resumes while events keep coming reads what it missed
// from the stream and then joins the shared live events: every event
// after its Last-Event-ID comes once, in order.
func TestResumeJoinsTheLiveEventsWithoutGapOrRepeat(t *testing.T) {
	t.Parallel()
	sess, other := uuid.New(), uuid.New()
	e := newStreamEnv(t, Config{}, fakeOwners{sess: "alice", other: "alice"}, nil)
	path := "/api/agents/sessions/" + sess.String() + "/stream"
	// A stream that stays open keeps the fan-out reading while the
	// others join it.
	_, watcher := e.open(t, path, "alice", nil)
	waitOpen(t, watcher)

	const total = 300
	seqs := make([]uint64, 0, total)
	var mu sync.Mutex
	published := make(chan struct{})
	go func() {
		defer close(published)
		for i := range total {
			seq := e.publish(t, sess, "alice", "activity_recorded", map[string]any{"n": i})
			e.publish(t, other, "alice", "activity_recorded", map[string]any{"n": i})
			mu.Lock()
			seqs = append(seqs, seq)
			mu.Unlock()
		}
	}()
	seqsSoFar := func() []uint64 {
		mu.Lock()
		defer mu.Unlock()
		return append([]uint64(nil), seqs...)
	}

	type resumed struct {
		after uint64
		ch    <-chan sseEvent
	}
	var streams []resumed
	for _, at := range []int{20, 80, 150, 220} {
		require.Eventually(t, func() bool { return len(seqsSoFar()) > at }, 30*time.Second, time.Millisecond)
		after := seqsSoFar()[at]
		_, ch := e.open(t, path, "alice", http.Header{"Last-Event-Id": {strconv.FormatUint(after, 10)}})
		streams = append(streams, resumed{after: after, ch: ch})
	}
	<-published
	all := seqsSoFar()
	for _, r := range streams {
		var want []uint64
		for _, s := range all {
			if s > r.after {
				want = append(want, s)
			}
		}
		got := make([]uint64, 0, len(want))
		for range want {
			got = append(got, seqOf(t, next(t, r.ch, 10*time.Second)))
		}
		require.Equal(t, want, got, "resumed after %d", r.after)
	}
	for _, want := range all {
		require.Equal(t, want, seqOf(t, next(t, watcher, 10*time.Second)))
	}
}

// A client that falls behind for less than SlowClientTimeout loses its
// place in the shared live events, but its stream catches up from the
// stream by itself: it gets everything, in order, without a reconnect.
func TestSlowClientCatchesUpWithinTheTimeout(t *testing.T) {
	t.Parallel()
	sess := uuid.New()
	e, client := newSlowClientEnv(t, sess, time.Minute)
	tok, err := NewToken(testSecret, "alice", time.Hour)
	require.NoError(t, err)
	_, ch := openStream(t, client, e.http.URL+"/api/agents/sessions/"+sess.String()+"/stream", tok, nil)
	waitOpen(t, ch)

	big := strings.Repeat("x", 32<<10)
	var seqs []uint64
	for i := range 40 {
		seqs = append(seqs, e.publish(t, sess, "alice", "assistant_message", map[string]any{"n": i, "text": big}))
	}
	time.Sleep(300 * time.Millisecond)
	for _, want := range seqs {
		ev := next(t, ch, 30*time.Second)
		require.Equal(t, "event", ev.Event, "no reconnect: %s", ev.Data)
		require.Equal(t, want, seqOf(t, ev))
	}
	// At least once: under load the fan-out's own consumer can still be
	// behind the stream when the client joins again, and the events it
	// then hands on can overflow the client's buffer a second time.
	assert.GreaterOrEqual(t, e.server.fanout.lagged.Load(), int64(1), "the client fell out of the live events")
}
