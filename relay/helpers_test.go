package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
	"github.com/agentbus/agentbus/internal/localserver"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/relay"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// wait is the generous bound of every Eventually: tests never depend on how
// fast the machine is.
const wait = 90 * time.Second

// env is a JetStream server with the agentbus streams and a Redis server.
type env struct {
	t        testing.TB
	srv      *server.Server
	js       jetstream.JetStream
	rdb      *redis.Client
	redisURL string
	sessions jetstream.KeyValue
}

func newEnv(t testing.TB) *env {
	t.Helper()
	srv, js, _ := bustest.Server(t)
	e := &env{t: t, srv: srv, js: js, redisURL: testenv.RedisURL(t)}
	e.rdb = testenv.RedisClient(t, e.redisURL)
	kv, err := relay.SessionsKV(context.Background(), js)
	require.NoError(t, err)
	e.sessions = kv
	return e
}

// privateRedis switches e to a Redis server of the test's own.
func (e *env) privateRedis() *localserver.Redis {
	e.t.Helper()
	srv := testenv.PrivateRedis(e.t)
	e.redisURL = srv.URL()
	e.rdb = testenv.RedisClient(e.t, e.redisURL)
	return srv
}

// restartNATS restarts the NATS server on its port and store.
func (e *env) restartNATS() {
	e.t.Helper()
	e.srv = bustest.Restart(e.t, e.srv)
}

// proc is a relay running in the test process with its own connections, as
// a separate relay process would.
type proc struct {
	relay  *relay.Relay
	cancel context.CancelFunc
	done   chan error
	nc     *nats.Conn
	rdb    *redis.Client
	once   sync.Once
	err    error
	killed bool
}

// testLogger logs relay warnings to the test output when -v is set.
func testLogger(t testing.TB) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("test", t.Name())
}

// start runs a relay named name; mod adjusts its configuration.
func (e *env) start(name string, mod func(*relay.Config)) *proc {
	e.t.Helper()
	nc, js := bustest.Connect(e.t, e.srv)
	rdb := testenv.RedisClient(e.t, e.redisURL)
	cfg := relay.Config{
		Redis:        rdb,
		JetStream:    js,
		Name:         name,
		Block:        200 * time.Millisecond,
		LeaseTTL:     2 * time.Second,
		DrainQuiet:   200 * time.Millisecond,
		TrimInterval: -1,
		Logger:       testLogger(e.t),
	}
	if mod != nil {
		mod(&cfg)
	}
	r, err := relay.New(cfg)
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	p := &proc{relay: r, cancel: cancel, done: make(chan error, 1), nc: nc, rdb: rdb}
	go func() { p.done <- r.Run(ctx) }()
	e.t.Cleanup(func() {
		if !p.killed {
			p.stop()
			require.NoError(e.t, p.err, "relay %s", name)
		}
	})
	return p
}

// stop shuts the relay down gracefully and waits for it.
func (p *proc) stop() {
	p.once.Do(func() {
		p.cancel()
		p.err = <-p.done
	})
}

// kill stops the relay as a crash would: its connections drop at once and
// it gets no chance to clean up.
func (p *proc) kill() {
	p.once.Do(func() {
		p.killed = true
		p.nc.Close()
		_ = p.rdb.Close()
		p.cancel()
		p.err = <-p.done
	})
}

// activate lists sessions for relaying.
func (e *env) activate(ids ...string) {
	e.t.Helper()
	for _, id := range ids {
		require.NoError(e.t, relay.Activate(context.Background(), e.sessions, id))
	}
}

func newSessions(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	return ids
}

// xadd appends events n from..to-1 of a session to its stream, in one round
// trip; event n has data {"n": n} and type usage_update.
func xadd(ctx context.Context, rdb redis.Cmdable, id string, from, to int) error {
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for n := from; n < to; n++ {
			p.XAdd(ctx, &redis.XAddArgs{Stream: relay.EventsKey(id), Values: []any{
				"type", "usage_update", "data", fmt.Sprintf(`{"n":%d}`, n), "ts", strconv.FormatInt(time.Now().UnixMilli(), 10),
			}})
		}
		return nil
	})
	return err
}

// received is what a test read back from AGENTS_SIDECAR_EVENTS.
type received struct {
	msgs     int
	msgIDs   map[string]int
	bySess   map[string][]relay.Event
	invalids []relay.Event
}

// readEvents reads every message of AGENTS_SIDECAR_EVENTS once its count
// reaches want, then checks nothing more arrives for a moment.
func (e *env) readEvents(want int) *received {
	e.t.Helper()
	ctx := context.Background()
	stream, err := e.js.Stream(ctx, bus.StreamSidecarEvents)
	require.NoError(e.t, err)
	var last uint64
	require.Eventually(e.t, func() bool {
		info, err := stream.Info(ctx)
		if err != nil {
			return false
		}
		last = info.State.Msgs
		return last >= uint64(want)
	}, wait, 20*time.Millisecond, "waiting for %d events", want)
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	require.NoError(e.t, err)
	it, err := cons.Messages()
	require.NoError(e.t, err)
	defer it.Stop()
	got := &received{msgIDs: map[string]int{}, bySess: map[string][]relay.Event{}}
	for uint64(got.msgs) < last {
		m, err := it.Next()
		require.NoError(e.t, err)
		got.msgs++
		got.msgIDs[m.Headers().Get(jetstream.MsgIDHeader)]++
		var ev relay.Event
		require.NoError(e.t, json.Unmarshal(m.Data(), &ev))
		require.Equal(e.t, ev.EntryID, m.Headers().Get(relay.HeaderRedisEntry))
		require.Equal(e.t, relay.MsgID(ev.SessionID, ev.EntryID), m.Headers().Get(jetstream.MsgIDHeader))
		require.Equal(e.t, bus.SidecarEventSubject(ev.SessionID, ev.Type), m.Subject())
		if ev.Type == relay.TypeInvalid {
			got.invalids = append(got.invalids, ev)
		}
		got.bySess[ev.SessionID] = append(got.bySess[ev.SessionID], ev)
	}
	return got
}

// checkSequences checks every session got events 0..n-1 exactly once and in
// order, and that no message id repeats.
func checkSequences(t testing.TB, got *received, n map[string]int) {
	t.Helper()
	for id, c := range got.msgIDs {
		require.Equal(t, 1, c, "message id %s stored %d times", id, c)
	}
	total := 0
	for id, want := range n {
		evs := got.bySess[id]
		ns := make([]int, len(evs))
		for i, ev := range evs {
			var d struct{ N int }
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			ns[i] = d.N
			if i > 0 {
				require.True(t, relayIDBefore(evs[i-1].EntryID, ev.EntryID), "session %s: entry %s after %s", id, ev.EntryID, evs[i-1].EntryID)
			}
		}
		require.Len(t, evs, want, "session %s", id)
		for i := range ns {
			require.Equal(t, i, ns[i], "session %s: event %d out of order or repeated: %v", id, i, ns[max(0, i-3):min(len(ns), i+3)])
		}
		total += want
	}
	require.Equal(t, total, got.msgs)
}

func relayIDBefore(a, b string) bool {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	x, _ := strconv.ParseUint(am, 10, 64)
	y, _ := strconv.ParseUint(bm, 10, 64)
	if x != y {
		return x < y
	}
	xs, _ := strconv.ParseUint(as, 10, 64)
	ys, _ := strconv.ParseUint(bs, 10, 64)
	return xs < ys
}
