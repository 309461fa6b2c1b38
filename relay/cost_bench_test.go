package relay_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/agentbus/agentbus/relay"
)

// costActive is how many of the live sessions write events during the
// measurement, each at one event a second.
const costActive = 100

// BenchmarkRedisCost measures what the relay costs Redis, on a Redis server
// of its own, at 100, 1,000 and 10,000 live sessions of which 100 write one
// event a second each:
//
//   - xadd-µs: Redis CPU (INFO used_cpu_sys + used_cpu_user) per bare XADD at
//     the same rate with no relay reading, the floor;
//   - redis-µs/event: Redis CPU per event while the relay forwards them,
//     the writer's XADD included, and its ratio to the floor;
//   - uptake-sessions/s: how fast a relay starting with every session
//     listed, each with one event waiting and seen by no relay before,
//     takes them up: leases, first sight, every first event stored;
//     activate-sessions/s is how fast they were listed, 16 at a time;
//   - idle-cpu-%: with every session idle (and what they wrote trimmed), the
//     CPU of Redis and of this process (the relay and the embedded NATS
//     server) over a trim period, in percent of a core.
//
// The sizes are sub-benchmarks: -bench 'BenchmarkRedisCost/live=1000$'.
// One iteration measures everything; b.N is not used.
func BenchmarkRedisCost(b *testing.B) {
	for _, live := range []int{100, 1000, 10_000} {
		b.Run("live="+strconv.Itoa(live), func(b *testing.B) { benchRedisCost(b, live) })
	}
}

func benchRedisCost(b *testing.B, live int) {
	const activeFor = 10 * time.Second
	const trimEvery = 20 * time.Second
	ctx := context.Background()
	e := newEnv(b)
	e.privateRedis()
	ids := newSessions(live)
	b.ResetTimer()

	// The floor: bare XADDs at the rate the active sessions write, to keys
	// nobody reads.
	floorIDs := newSessions(costActive)
	cpu0 := redisCPU(b, e.rdb)
	n := paceWrites(b, e.rdb, floorIDs, activeFor, 0)
	floor := (redisCPU(b, e.rdb) - cpu0) / float64(n)

	// Uptake: every session holds one event and is listed when the relay
	// starts.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for lo := 0; lo < live; lo += 1000 {
		chunk := ids[lo:min(lo+1000, live)]
		g.Go(func() error {
			_, err := e.rdb.Pipelined(gctx, func(pipe redis.Pipeliner) error {
				for _, id := range chunk {
					pipe.XAdd(gctx, &redis.XAddArgs{Stream: relay.EventsKey(id), Values: benchEntry(0)})
				}
				return nil
			})
			return err
		})
	}
	require.NoError(b, g.Wait())
	start := time.Now()
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, id := range ids {
		g.Go(func() error { return relay.Activate(gctx, e.sessions, id) })
	}
	require.NoError(b, g.Wait())
	activated := float64(live) / time.Since(start).Seconds()
	start = time.Now()
	p := e.start("relay-cost", func(c *relay.Config) {
		c.Logger = slog.New(slog.DiscardHandler)
		c.LeaseTTL = 10 * time.Second
		c.Block = time.Second
		c.TrimInterval = trimEvery
	})
	waitStored(b, e.js, uint64(live))
	uptake := float64(live) / time.Since(start).Seconds()

	// Forwarding: 100 of the sessions write, one event a second each, once
	// the first events are trimmed.
	time.Sleep(trimEvery + 2*time.Second)
	cpu0 = redisCPU(b, e.rdb)
	n = paceWrites(b, e.rdb, ids[:costActive], activeFor, 1)
	waitStored(b, e.js, uint64(live+n))
	perEvent := (redisCPU(b, e.rdb) - cpu0) / float64(n)

	// Idle: nothing written for a trim period, after the trim of what was
	// written.
	time.Sleep(trimEvery + 2*time.Second)
	cpu0, self0, t0 := redisCPU(b, e.rdb), processCPU(), time.Now()
	time.Sleep(trimEvery + time.Second)
	elapsed := time.Since(t0).Seconds()
	redisIdle := (redisCPU(b, e.rdb) - cpu0) / elapsed
	selfIdle := (processCPU() - self0) / elapsed
	b.StopTimer()

	b.ReportMetric(floor*1e6, "xadd-µs")
	b.ReportMetric(perEvent*1e6, "redis-µs/event")
	b.ReportMetric(perEvent/floor, "event/xadd")
	b.ReportMetric(uptake, "uptake-sessions/s")
	b.ReportMetric(activated, "activate-sessions/s")
	b.ReportMetric(100*redisIdle, "idle-redis-%")
	b.ReportMetric(100*(redisIdle+selfIdle), "idle-cpu-%")
	b.ReportMetric(0, "ns/op")
	p.stop()
}

// paceWrites writes one event a second to each session, spread evenly over
// the second, for d; it returns how many it wrote. Event numbers start at
// first.
func paceWrites(b *testing.B, rdb *redis.Client, ids []string, d time.Duration, first int) int {
	ctx := context.Background()
	tick := time.NewTicker(time.Second / time.Duration(len(ids)))
	defer tick.Stop()
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); n++ {
		<-tick.C
		id := ids[n%len(ids)]
		require.NoError(b, rdb.XAdd(ctx, &redis.XAddArgs{Stream: relay.EventsKey(id), Values: benchEntry(first + n/len(ids))}).Err())
	}
	return n
}

func benchEntry(n int) []any {
	return []any{"type", "usage_update", "data", `{"n":` + strconv.Itoa(n) + `}`, "ts", "1700000000000"}
}

// redisCPU returns the CPU seconds the Redis server has used.
func redisCPU(b *testing.B, rdb *redis.Client) float64 {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	require.NoError(b, err)
	total := 0.0
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(b, err)
			total += f
		}
	}
	return total
}

// processCPU returns the CPU seconds this process has used.
func processCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
