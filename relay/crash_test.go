package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/relay"
)

// streamSessions writes events 0..per-1 to every session in bursts of up
// to 10, pausing about pace between bursts, and returns a function that
// waits for the writers.
func streamSessions(t testing.TB, url string, ids []string, per int, pace time.Duration) func() {
	t.Helper()
	rdb := writerClient(t, url)
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			ctx := context.Background()
			for n := 0; n < per; {
				burst := min(1+rand.IntN(10), per-n)
				if err := xadd(ctx, rdb, id, n, n+burst); err != nil {
					// Redis is restarting, and part of the burst may have
					// been written: go on after the last event that was.
					require.Eventually(t, func() bool {
						last, err := lastEvent(ctx, rdb, id)
						n = last + 1
						return err == nil
					}, wait, 50*time.Millisecond)
					continue
				}
				n += burst
				time.Sleep(time.Duration(rand.Int64N(int64(2*pace) + 1)))
			}
		})
	}
	return wg.Wait
}

// writerClient returns a client that never retries by itself: a retried
// XADD whose answer was lost would write the event twice.
func writerClient(t testing.TB, url string) *redis.Client {
	opts, err := redis.ParseURL(url)
	require.NoError(t, err)
	opts.MaxRetries = -1
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// lastEvent returns the number of the last event in a session's stream, -1
// when it is empty.
func lastEvent(ctx context.Context, rdb *redis.Client, id string) (int, error) {
	msgs, err := rdb.XRevRangeN(ctx, relay.EventsKey(id), "+", "-", 1).Result()
	if err != nil || len(msgs) == 0 {
		return -1, err
	}
	var d struct{ N int }
	err = json.Unmarshal([]byte(msgs[0].Values["data"].(string)), &d)
	return d.N, err
}

// TestKilledRelay kills the relay at random points while ten sessions
// stream, each time starting a new one (alternately under the same name,
// which resumes at once, and under a new name, which takes the dead relay's
// leases over once its heartbeat expires). Nothing is lost or doubled.
func TestKilledRelay(t *testing.T) {
	e := newEnv(t)
	ids := newSessions(10)
	e.activate(ids...)
	const per = 600
	waitWriters := streamSessions(t, e.redisURL, ids, per, 3*time.Millisecond)

	short := func(c *relay.Config) {
		c.LeaseTTL = 500 * time.Millisecond
		c.MaxBatch = 1 + rand.IntN(50)
		c.ReadCount = 1 + rand.IntN(20)
	}
	for i := range 12 {
		name := "relay-crash"
		if i%3 == 2 {
			name = fmt.Sprintf("relay-crash-%d", i)
		}
		p := e.start(name, short)
		time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond)
		p.kill()
	}
	e.start("relay-final", short)
	waitWriters()

	want := map[string]int{}
	for _, id := range ids {
		want[id] = per
	}
	checkSequences(t, e.readEvents(len(ids)*per), want)
}

// TestRedisRestart restarts Redis while sessions stream, and kills it while
// the relay works through a backlog; the relay reconnects and resumes.
func TestRedisRestart(t *testing.T) {
	e := newEnv(t)
	srv := e.privateRedis()
	ids := newSessions(5)
	e.activate(ids...)
	e.start("relay-a", nil)
	want := map[string]int{}

	// A clean restart keeps every acknowledged write.
	waitWriters := streamSessions(t, e.redisURL, ids, 400, 10*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	srv.Stop()
	srv = testenv.RestartRedis(t, srv)
	waitWriters()
	for _, id := range ids {
		want[id] = 400
	}
	checkSequences(t, e.readEvents(len(ids)*400), want)

	// A crash loses up to a second of writes (appendfsync everysec): write a
	// backlog, give Redis time to sync it, and kill it while the relay may
	// still be publishing and acknowledging.
	ctx := context.Background()
	for _, id := range ids {
		require.NoError(t, xadd(ctx, e.rdb, id, 400, 1400))
		want[id] = 1400
	}
	time.Sleep(1500 * time.Millisecond)
	srv.Kill()
	srv = testenv.RestartRedis(t, srv)
	rdb := writerClient(t, srv.URL())
	for _, id := range ids {
		require.Eventually(t, func() bool { return xadd(ctx, rdb, id, 1400, 1500) == nil }, wait, 50*time.Millisecond)
		want[id] = 1500
	}
	checkSequences(t, e.readEvents(len(ids)*1500), want)
}

// TestNATSRestart restarts the NATS server while sessions stream.
func TestNATSRestart(t *testing.T) {
	e := newEnv(t)
	ids := newSessions(5)
	e.activate(ids...)
	e.start("relay-a", nil)
	const per = 400
	waitWriters := streamSessions(t, e.redisURL, ids, per, 10*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	e.restartNATS()
	waitWriters()
	want := map[string]int{}
	for _, id := range ids {
		want[id] = per
	}
	checkSequences(t, e.readEvents(len(ids)*per), want)
}

// TestNoDuplicatesBeyondTheWindow shrinks the stream's duplicate window and
// then makes already relayed entries readable again, as a dead relay's
// pending entries or a Redis that lost its group would: the relay resumes
// after the last stored event instead of relying on Nats-Msg-Id.
func TestNoDuplicatesBeyondTheWindow(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	stream, err := e.js.Stream(ctx, bus.StreamSidecarEvents)
	require.NoError(t, err)
	cfg := stream.CachedInfo().Config
	cfg.Duplicates = 100 * time.Millisecond
	_, err = e.js.UpdateStream(ctx, cfg)
	require.NoError(t, err)

	ids := newSessions(2)
	e.activate(ids...)
	for _, id := range ids {
		require.NoError(t, xadd(ctx, e.rdb, id, 0, 50))
	}
	a := e.start("relay-a", nil)
	e.readEvents(100)
	a.stop()

	// The first session's group forgets what it delivered; the second's
	// entries are pending with a relay that died before acknowledging.
	require.NoError(t, e.rdb.XGroupSetID(ctx, relay.EventsKey(ids[0]), relay.DefaultGroup, "0").Err())
	require.NoError(t, e.rdb.XGroupSetID(ctx, relay.EventsKey(ids[1]), relay.DefaultGroup, "0").Err())
	_, err = e.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: relay.DefaultGroup, Consumer: "relay-dead",
		Streams: []string{relay.EventsKey(ids[1]), ">"}, Count: 30, Block: -1}).Result()
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond)

	e.start("relay-b", nil)
	for _, id := range ids {
		require.NoError(t, xadd(ctx, e.rdb, id, 50, 60))
	}
	checkSequences(t, e.readEvents(120), map[string]int{ids[0]: 60, ids[1]: 60})
	for _, id := range ids {
		require.Eventually(t, func() bool {
			p, err := e.rdb.XPending(ctx, relay.EventsKey(id), relay.DefaultGroup).Result()
			return err == nil && p.Count == 0
		}, wait, 20*time.Millisecond, "everything acknowledged")
	}
}
