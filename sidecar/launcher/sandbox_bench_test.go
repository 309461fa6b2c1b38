package launcher_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/sidecar/launcher"
	"github.com/agentbus/agentbus/sidecar/protocol"
	"github.com/agentbus/agentbus/sidecar/sandbox"
)

// BenchmarkSidecarStart measures, sandboxed beside unsandboxed in the same
// run, the time from StartSession to the sidecar's session_started (p50 of
// b.N starts of each, taken in turns), and the memory (private and PSS, from
// smaps_rollup) of every process of one idle sidecar: bwrap's two and the
// sidecar's in a sandbox, the sidecar's alone without. BenchmarkSidecarDensity
// measures it with many sidecars live.
//
//	go test -run '^$' -bench SidecarStart -benchtime 20x ./sidecar/launcher/
func BenchmarkSidecarStart(b *testing.B) {
	rdb, modes, start := benchLaunchers(b)

	took := map[string][]float64{}
	b.ResetTimer()
	for range b.N {
		for _, m := range modes {
			l := m.l
			id, d := start(l)
			took[m.name] = append(took[m.name], float64(d.Microseconds())/1000)
			require.NoError(b, l.Stop(id))
		}
	}
	b.StopTimer()
	p50 := map[string]float64{}
	for _, m := range modes {
		slices.Sort(took[m.name])
		p50[m.name] = took[m.name][len(took[m.name])/2]
		b.ReportMetric(p50[m.name], "ms-p50-"+m.name)
	}
	b.ReportMetric(p50["sandboxed"]-p50["unsandboxed"], "ms-p50-difference")

	// One idle sidecar of each: its turn done, waiting for a message.
	for _, m := range modes {
		l := m.l
		id, _ := start(l)
		waitFor(b, rdb, id, protocol.EventTurnCompleted)
		time.Sleep(500 * time.Millisecond)
		pid, ok := l.PID(id)
		require.True(b, ok)
		mem := treeMemory(pid)
		b.ReportMetric(float64(mem.private)/1024, "MiB-private-idle-"+m.name)
		b.ReportMetric(float64(mem.pss)/1024, "MiB-pss-idle-"+m.name)
		b.ReportMetric(float64(mem.processes), "processes-idle-"+m.name)
		require.NoError(b, l.Stop(id))
	}
}

// benchMode is a launcher of the benchmarks, sandboxed or not.
type benchMode struct {
	name string
	l    *launcher.Launcher
}

// benchLaunchers returns an unsandboxed and a sandboxed launcher running
// this test binary as the sidecar, and what starts one idle session of the
// script engine on either and waits for its session_started.
func benchLaunchers(b *testing.B) (*redis.Client, []benchMode, func(*launcher.Launcher) (string, time.Duration)) {
	rdb, redisURL := testenv.Redis(b), testenv.RedisURL(b)
	exe, err := os.Executable()
	require.NoError(b, err)
	sb, err := sandbox.New(sandbox.Config{})
	require.NoError(b, err)
	dir := b.TempDir()
	var modes []benchMode
	for _, m := range []struct {
		name string
		sb   *sandbox.Sandbox
	}{{"unsandboxed", nil}, {"sandboxed", sb}} {
		l, err := launcher.New(launcher.Config{Mode: launcher.ModeProcess, Redis: rdb, RedisURL: redisURL, Binary: exe,
			ConfigDir: filepath.Join(dir, "configs"), LogDir: filepath.Join(dir, "logs"), Name: "bench-" + m.name + "-" + uuid.NewString()[:8],
			Sandbox: m.sb, SandboxDir: filepath.Join(dir, "sandboxes"), Logger: slog.New(slog.DiscardHandler)})
		require.NoError(b, err)
		require.NoError(b, l.Start(context.Background()))
		b.Cleanup(func() { _ = l.Close() })
		modes = append(modes, benchMode{m.name, l})
	}
	zero := int64(0)
	start := func(l *launcher.Launcher) (string, time.Duration) {
		work := filepath.Join(dir, "work", uuid.NewString())
		require.NoError(b, os.MkdirAll(work, 0o755))
		cfg := protocol.Config{SessionID: uuid.NewString(), Objective: "Say hello", WorkingDirectory: work, StayIdle: true,
			Script: protocol.ScriptOptions{Scenario: "default", PaceMS: &zero}}
		t0 := time.Now()
		_, err := l.StartSession(context.Background(), cfg, "k")
		require.NoError(b, err)
		waitFor(b, rdb, cfg.SessionID, protocol.EventSessionStarted)
		return cfg.SessionID, time.Since(t0)
	}
	return rdb, modes, start
}

// BenchmarkSidecarDensity measures what a live session's sidecar costs in
// memory when many are live at once: for each number of live sessions
// (AGENTBUS_BENCH_LIVE_SIDECARS, comma-separated, 1,10,50 by default) it
// starts that many idle script sidecars, sandboxed and unsandboxed in
// turn, and reports per session their private memory (what each adds to
// the machine) and PSS (with its share of the pages the sidecars share,
// the binary's above all, which shrinks as more are live), from
// smaps_rollup, beside the number of live sessions. RSS would count the
// shared binary whole in every sidecar.
//
//	go test -run '^$' -bench SidecarDensity ./sidecar/launcher/
func BenchmarkSidecarDensity(b *testing.B) {
	counts := []int{1, 10, 50}
	if v := os.Getenv("AGENTBUS_BENCH_LIVE_SIDECARS"); v != "" {
		counts = nil
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			require.NoError(b, err, "AGENTBUS_BENCH_LIVE_SIDECARS")
			counts = append(counts, n)
		}
	}
	rdb, modes, start := benchLaunchers(b)
	for _, live := range counts {
		b.Run("live="+strconv.Itoa(live), func(b *testing.B) {
			// One iteration measures everything (it takes well over the
			// default -benchtime); b.N is not used.
			b.ReportMetric(float64(live), "live-sessions")
			for _, m := range modes {
				ids := make([]string, live)
				for i := range ids {
					ids[i], _ = start(m.l)
				}
				for _, id := range ids {
					waitFor(b, rdb, id, protocol.EventTurnCompleted)
				}
				time.Sleep(500 * time.Millisecond)
				var mem memory
				for _, id := range ids {
					pid, ok := m.l.PID(id)
					require.True(b, ok)
					mem.add(treeMemory(pid))
				}
				n := float64(live)
				b.ReportMetric(float64(mem.private)/1024/n, "MiB-private/session-"+m.name)
				b.ReportMetric(float64(mem.pss)/1024/n, "MiB-pss/session-"+m.name)
				b.ReportMetric(float64(mem.processes)/n, "processes/session-"+m.name)
				for _, id := range ids {
					require.NoError(b, m.l.Stop(id))
				}
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

func waitFor(b *testing.B, rdb *redis.Client, id, typ string) {
	b.Helper()
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		msgs, err := rdb.XRange(context.Background(), protocol.EventsKey(id), "-", "+").Result()
		require.NoError(b, err)
		for _, m := range msgs {
			if m.Values["type"] == typ {
				return
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	b.Fatalf("no %s for session %s", typ, id)
}

// memory is what a tree of processes holds, in KiB, from smaps_rollup.
type memory struct {
	// private is the pages no other process maps: what the tree alone
	// costs the machine.
	private int64
	// pss is the proportional set size: private pages, plus each shared
	// page divided by the number of processes mapping it. Summed over
	// every process it is the machine's memory in use.
	pss       int64
	processes int
}

func (m *memory) add(o memory) {
	m.private += o.private
	m.pss += o.pss
	m.processes += o.processes
}

// treeMemory sums the memory of pid and its descendants.
func treeMemory(pid int) memory {
	var mem memory
	for _, p := range append([]int{pid}, descendants(pid)...) {
		f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", p))
		if err != nil {
			continue
		}
		mem.processes++
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 2 {
				continue
			}
			v, _ := strconv.ParseInt(fields[1], 10, 64)
			switch fields[0] {
			case "Pss:":
				mem.pss += v
			case "Private_Clean:", "Private_Dirty:":
				mem.private += v
			}
		}
		f.Close()
	}
	return mem
}
