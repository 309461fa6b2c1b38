package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/sidecar/protocol"
	"github.com/agentbus/agentbus/sidecar/runners"
)

// The fleet benchmark's knobs.
const (
	// envFleetSessions is how many sessions the fleet runs. Default 1000.
	envFleetSessions = "AGENTBUS_BENCH_FLEET_SESSIONS"
	// envFleetRunners is how many runner processes run them. Default 10.
	envFleetRunners = "AGENTBUS_BENCH_FLEET_RUNNERS"
	// fleetCreators is how many clients create the sessions at once.
	fleetCreators = 8
)

// BenchmarkRunnerFleet runs 1,000 sessions over 10 runner processes
// (AGENTBUS_BENCH_FLEET_SESSIONS, AGENTBUS_BENCH_FLEET_RUNNERS) placed by
// `up`'s runtime, on the real Postgres, Redis and NATS, and measures:
//
//   - placement-p50-ms, placement-p99-ms: from a session's creation (its
//     POST sent) until its sidecar started (its session_started written),
//     while every session is created by 8 clients at once, so it includes
//     the wait behind the sessions created before; started/s beside it is
//     the sessions started per second, from the first creation until
//     every sidecar started;
//   - recovery-all-s, recovery-p50-s: from a kill -9 of the runner with
//     the most sessions until each of them started again on another
//     runner, resuming its engine session, beside lease-ttl-s, the lease
//     TTL (AGENTBUS_RUNNER_LEASE_TTL), which the recovery waits out.
//
// The runners run each sidecar as a stand-in in their own process
// (standInSidecars): it speaks the sidecar's Redis contract with an
// engine that does nothing, so that a small machine holds the fleet. One
// iteration measures everything; b.N is not used.
//
//	make bench-fleet
func BenchmarkRunnerFleet(b *testing.B) {
	n, fleet := envInts(b, envFleetSessions, "1000")[0], envInts(b, envFleetRunners, "10")[0]
	require.True(b, n > 0 && fleet > 1, "%s and %s: sessions, and two runners or more", envFleetSessions, envFleetRunners)
	ttl, err := leaseTTL()
	require.NoError(b, err)
	capacity := 2 * ((n + fleet - 1) / fleet) // room for the sessions of a dead runner
	u := startUpWithRuntime(b, "--runner-capacity", "0", "--pool-max", fmt.Sprint(max(n, 1)))
	procs := u.startFleet(b, fleet, capacity)
	starts := watchStarts(b, u)

	begun := time.Now()
	created := u.createFleet(b, n)
	createdIn := time.Since(begun)
	starts.waitAll(b, created, time.Duration(n)*500*time.Millisecond+2*wait)
	placement := starts.placement(created)
	startedIn := time.Since(begun)

	victim, moved := u.busiestRunner(b, created)
	for _, id := range moved {
		u.waitStatus(id, "Idle") // its first turn is recorded: it resumes that conversation
	}
	killed := time.Now()
	require.NoError(b, procs[victim].Process.Signal(syscall.SIGKILL))
	recovery := starts.waitResumed(b, moved, killed, ttl+2*wait)
	u.assertMovedOff(b, moved, victim)

	b.ReportMetric(float64(n)/startedIn.Seconds(), "started/s")
	b.ReportMetric(ms(quantile(placement, 0.5)), "placement-p50-ms")
	b.ReportMetric(ms(quantile(placement, 0.99)), "placement-p99-ms")
	b.ReportMetric(quantile(recovery, 1).Seconds(), "recovery-all-s")
	b.ReportMetric(quantile(recovery, 0.5).Seconds(), "recovery-p50-s")
	b.ReportMetric(ttl.Seconds(), "lease-ttl-s")
	b.ReportMetric(float64(len(moved)), "moved-sessions")
	b.ReportMetric(0, "ns/op")
	fmt.Printf("fleet: %d sessions on %d runners of capacity %d: placement (created → sidecar started) p50 %.0f ms, p99 %.0f ms\n",
		n, fleet, capacity, ms(quantile(placement, 0.5)), ms(quantile(placement, 0.99)))
	fmt.Printf("fleet: the %d sessions created in %.1f s, every sidecar started %.1f s after the first creation (%.0f sessions/s)\n",
		n, createdIn.Seconds(), startedIn.Seconds(), float64(n)/startedIn.Seconds())
	fmt.Printf("fleet: %s killed with %d sessions: all resumed on other runners %.1f s after the kill (p50 %.1f s); lease TTL %s\n",
		victim, len(moved), quantile(recovery, 1).Seconds(), quantile(recovery, 0.5).Seconds(), ttl)
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Printf("fleet: load average %s\n", strings.Join(strings.Fields(string(load))[:3], " "))
	}
}

// startFleet starts the runner processes, with stand-in sidecars, and
// waits until each holds a lease.
func (u *upUnderTest) startFleet(b *testing.B, fleet, capacity int) map[string]*exec.Cmd {
	procs := map[string]*exec.Cmd{}
	for i := range fleet {
		name := fmt.Sprintf("fleet-%02d", i)
		procs[name] = startRunnerAs(b, u, standInRunnerCommand, name, capacity)
	}
	require.Eventually(b, func() bool {
		leased := u.runners()
		for name := range procs {
			if _, ok := leased[name]; !ok {
				return false
			}
		}
		return true
	}, 2*wait, 200*time.Millisecond, "every runner takes a lease")
	return procs
}

// createFleet creates n sessions, fleetCreators at a time, and returns
// when each one's creation was asked for, by id.
func (u *upUnderTest) createFleet(b *testing.B, n int) map[string]time.Time {
	created := make(map[string]time.Time, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan int)
	for range fleetCreators {
		wg.Go(func() {
			for i := range next {
				at := time.Now()
				id := u.start(map[string]any{"workingDirectory": fmt.Sprintf("fleet-%d", i), "objective": "Stand by"})
				mu.Lock()
				created[id] = at
				mu.Unlock()
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return created
}

// sidecarStart is one session_started of a session: when its sidecar
// wrote it, and the engine session it runs.
type sidecarStart struct {
	at       time.Time
	engineID string
	resumed  bool
}

// fleetStarts records every session_started the relay forwards, by
// session, oldest first.
type fleetStarts struct {
	mu sync.Mutex
	of map[string][]sidecarStart
}

// watchStarts follows the session_started raw events of every session.
func watchStarts(b *testing.B, u *upUnderTest) *fleetStarts {
	s := &fleetStarts{of: map[string][]sidecarStart{}}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	c, err := u.jetStream().OrderedConsumer(ctx, bus.StreamSidecarEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{bus.SidecarEventSubject("*", protocol.EventSessionStarted)},
	})
	require.NoError(b, err)
	cc, err := c.Consume(func(m jetstream.Msg) {
		var ev protocol.RawEvent
		var st protocol.SessionStarted
		if json.Unmarshal(m.Data(), &ev) != nil || json.Unmarshal(ev.Data, &st) != nil {
			b.Errorf("unreadable session_started on %s: %s", m.Subject(), m.Data())
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.of[ev.SessionID] = append(s.of[ev.SessionID], sidecarStart{at: time.UnixMilli(ev.TS), engineID: st.EngineSessionID, resumed: st.Resumed})
	})
	require.NoError(b, err)
	b.Cleanup(cc.Stop)
	return s
}

// waitAll waits up to limit until every session's sidecar started.
func (s *fleetStarts) waitAll(b *testing.B, created map[string]time.Time, limit time.Duration) {
	require.Eventually(b, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for id := range created {
			if len(s.of[id]) == 0 {
				return false
			}
		}
		return true
	}, limit, 100*time.Millisecond, "every session's sidecar starts")
}

// placement returns, for each session, the time from its creation until
// its first sidecar started.
func (s *fleetStarts) placement(created map[string]time.Time) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]time.Duration, 0, len(created))
	for id, at := range created {
		out = append(out, max(0, s.of[id][0].at.Sub(at)))
	}
	return out
}

// waitResumed waits up to limit until each of the sessions has a sidecar
// started after killed that resumes the engine session of its first, and
// returns how long after killed each one started.
func (s *fleetStarts) waitResumed(b *testing.B, ids []string, killed time.Time, limit time.Duration) []time.Duration {
	after := killed.Truncate(time.Millisecond)
	resumed := func(id string) (time.Duration, bool) {
		all := s.of[id]
		for _, st := range all[1:] {
			if !st.at.Before(after) && st.resumed && st.engineID == all[0].engineID {
				return max(0, st.at.Sub(killed)), true
			}
		}
		return 0, false
	}
	var out []time.Duration
	require.Eventually(b, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		out = out[:0]
		for _, id := range ids {
			d, ok := resumed(id)
			if !ok {
				return false
			}
			out = append(out, d)
		}
		return true
	}, limit, 50*time.Millisecond, "every session of the killed runner resumes its engine session elsewhere")
	return out
}

// busiestRunner returns the runner with the most of the sessions, and
// those sessions.
func (u *upUnderTest) busiestRunner(b *testing.B, created map[string]time.Time) (string, []string) {
	on := map[string][]string{}
	for id, a := range u.assignments(b) {
		if _, ok := created[id]; ok && a.Runner != "" {
			on[a.Runner] = append(on[a.Runner], id)
		}
	}
	victim := ""
	for name, ids := range on {
		if victim == "" || len(ids) > len(on[victim]) {
			victim = name
		}
	}
	require.NotEmpty(b, victim, "the sessions are assigned to runners")
	return victim, on[victim]
}

// assertMovedOff checks that none of the sessions is assigned to the dead
// runner any more.
func (u *upUnderTest) assertMovedOff(b *testing.B, ids []string, dead string) {
	all := u.assignments(b)
	for _, id := range ids {
		assert.NotEqual(b, dead, all[id].Runner, "session %s", id)
		assert.NotEmpty(b, all[id].Runner, "session %s", id)
	}
}

// assignments reads every session's assignment, by session id.
func (u *upUnderTest) assignments(b *testing.B) map[string]runners.Placed {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := runners.Open(ctx, u.jetStream(), runners.DefaultLeaseTTL)
	require.NoError(b, err)
	cache, err := store.Watch(ctx)
	require.NoError(b, err)
	return cache.All()
}

// quantile returns the q-quantile of ds (nearest rank), 1 its maximum.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
