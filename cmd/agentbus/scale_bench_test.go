package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/relay"
)

// The scale benchmark's knobs.
const (
	// envScaleSessions lists the numbers of live sessions to measure at
	// (comma-separated, increasing). Default "100,1000,10000".
	envScaleSessions = "AGENTBUS_BENCH_SCALE_SESSIONS"
	// envScaleIdle is how long the idle stack is watched, at least one
	// relay sweep (30s) so that the sweep is in it. Default 32s.
	envScaleIdle = "AGENTBUS_BENCH_SCALE_IDLE"
	// scaleActive is how many of the live sessions write events while the
	// forwarding is measured, each at one event a second, for scaleActiveFor.
	scaleActive    = 100
	scaleActiveFor = 10 * time.Second
)

// BenchmarkRelayScale measures what live sessions cost the whole stack:
// an `up` in external-sidecar mode (this process: the API, the workers,
// the relay and the embedded NATS server), its Redis and the Postgres
// server, at 100, 1,000 and 10,000 live sessions, each held by the relay:
//
//   - idle-up-%, idle-redis-%, idle-postgres-%: with every session idle,
//     the CPU each uses, in percent of a core, over a relay sweep (see
//     processCPU; "up" is this process, the benchmark's idle client
//     included);
//   - redis-µs/event: Redis CPU per raw event while 100 of the sessions
//     write one event a second each and the relay forwards them, the
//     writer's XADD included; xadd-µs is the floor measured beside it in
//     the same run, bare XADDs at the same rate to keys nobody reads, and
//     event/xadd their ratio.
//
// relay's BenchmarkRedisCost measures the relay alone on a Redis of its
// own. The sizes are sub-benchmarks (-bench 'BenchmarkRelayScale/live=1000$');
// one iteration measures everything, b.N is not used.
//
//	make bench-relay
func BenchmarkRelayScale(b *testing.B) {
	sizes := envInts(b, envScaleSessions, "100,1000,10000")
	idleFor := 32 * time.Second
	if v := os.Getenv(envScaleIdle); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(b, err, "%s=%q", envScaleIdle, v)
		idleFor = d
	}
	u := startExternalUp(b, "scalebench")
	var ids []string
	for _, live := range sizes {
		b.Run("live="+strconv.Itoa(live), func(b *testing.B) {
			ids = u.growSessions(b, ids, live)
			u.quiet(b)

			// The floor: bare XADDs at the rate the active sessions write,
			// to keys nobody reads.
			cpu0 := processCPU()["redis"]
			n := paceXAdds(b, u.rdb, func(i int) string { return fmt.Sprintf("agent:bench:floor:%d", i%scaleActive) }, 0)
			floor := (processCPU()["redis"] - cpu0) / float64(n)
			require.NoError(b, u.rdb.Del(u.ctx, floorKeys()...).Err())

			// Forwarding: 100 of the sessions write.
			stored := u.storedRaw(b)
			cpu0 = processCPU()["redis"]
			n = paceXAdds(b, u.rdb, func(i int) string { return relay.EventsKey(ids[i%scaleActive]) }, live)
			require.Eventually(b, func() bool { return u.storedRaw(b) >= stored+uint64(n) }, 2*wait, 50*time.Millisecond,
				"the relay forwards the %d events", n)
			perEvent := (processCPU()["redis"] - cpu0) / float64(n)
			u.quiet(b)

			// Idle: nothing written for a sweep.
			before, t0 := processCPU(), time.Now()
			time.Sleep(idleFor)
			after, elapsed := processCPU(), time.Since(t0).Seconds()
			for _, p := range []string{"up", "redis", "postgres"} {
				b.ReportMetric(100*(after[p]-before[p])/elapsed, "idle-"+p+"-%")
			}
			b.ReportMetric(floor*1e6, "xadd-µs")
			b.ReportMetric(perEvent*1e6, "redis-µs/event")
			b.ReportMetric(perEvent/floor, "event/xadd")
			b.ReportMetric(float64(live), "live-sessions")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// growSessions creates sessions, several at a time, until n are live and
// held by the relay, and returns them all.
func (u *externalUp) growSessions(b *testing.B, ids []string, n int) []string {
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				id := u.createSession(b, i)
				require.NoError(b, relay.Activate(u.ctx, u.kv, id))
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
		})
	}
	for i := len(ids); i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return ids
}

// createSession starts session number i, waiting and trying again while
// the rate limit refuses it, and returns its id.
func (u *externalUp) createSession(b *testing.B, i int) string {
	body := fmt.Sprintf(`{"workingDirectory":%q,"objective":"Idle","budgetCapUsd":5}`,
		u.dataDir+"/workspace/"+u.owner+"/scale"+strconv.Itoa(i))
	for {
		req, err := http.NewRequest(http.MethodPost, u.base+"/api/agents/sessions", strings.NewReader(body))
		require.NoError(b, err)
		req.Header.Set("Authorization", "Bearer "+u.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(b, err)
		var out struct {
			Session struct {
				ID string `json:"id"`
			} `json:"session"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			time.Sleep(max(time.Duration(wait)*time.Second, 100*time.Millisecond))
			continue
		}
		require.NoError(b, err)
		require.Equal(b, http.StatusCreated, resp.StatusCode)
		require.NotEmpty(b, out.Session.ID)
		return out.Session.ID
	}
}

// quiet waits until the stack stores nothing more on JetStream for two
// seconds.
func (u *externalUp) quiet(b *testing.B) {
	last := u.storedAll(b)
	for still := 0; still < 8; {
		time.Sleep(250 * time.Millisecond)
		if now := u.storedAll(b); now != last {
			still, last = 0, now
		} else {
			still++
		}
	}
}

func (u *externalUp) storedAll(b *testing.B) uint64 {
	var n uint64
	lister := u.js.ListStreams(u.ctx)
	for info := range lister.Info() {
		n += info.State.Msgs
	}
	require.NoError(b, lister.Err())
	return n
}

// storedRaw is what AGENTS_SIDECAR_EVENTS has stored: the raw events the
// relay forwarded.
func (u *externalUp) storedRaw(b *testing.B) uint64 {
	s, err := u.js.Stream(u.ctx, bus.StreamSidecarEvents)
	require.NoError(b, err)
	info, err := s.Info(u.ctx)
	require.NoError(b, err)
	return info.State.LastSeq
}

// paceXAdds writes scaleActive events a second, one to each of the keys
// key(0) … key(scaleActive-1) in turn, spread evenly over the second, for
// scaleActiveFor; it returns how many it wrote. first numbers the events.
func paceXAdds(b *testing.B, rdb *redis.Client, key func(i int) string, first int) int {
	ctx := context.Background()
	tick := time.NewTicker(time.Second / scaleActive)
	defer tick.Stop()
	n := 0
	for end := time.Now().Add(scaleActiveFor); time.Now().Before(end); n++ {
		<-tick.C
		require.NoError(b, rdb.XAdd(ctx, &redis.XAddArgs{Stream: key(n), Values: []any{
			"type", "usage_update", "data", `{"n":` + strconv.Itoa(first+n) + `}`,
			"ts", strconv.FormatInt(time.Now().UnixMilli(), 10)}}).Err())
	}
	return n
}

func floorKeys() []string {
	keys := make([]string, scaleActive)
	for i := range keys {
		keys[i] = fmt.Sprintf("agent:bench:floor:%d", i)
	}
	return keys
}
