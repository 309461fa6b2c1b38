package launcher_test

import (
	"bufio"
	"context"
	"fmt"
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
// b.N starts of each, taken in turns), and the memory (RSS and PSS, from
// smaps_rollup) of every process of one idle sidecar: bwrap's two and the
// sidecar's in a sandbox, the sidecar's alone without.
//
//	go test -run '^$' -bench SidecarStart -benchtime 20x ./sidecar/launcher/
func BenchmarkSidecarStart(b *testing.B) {
	rdb, redisURL := testenv.Redis(b), testenv.RedisURL(b)
	exe, err := os.Executable()
	require.NoError(b, err)
	sb, err := sandbox.New(sandbox.Config{})
	require.NoError(b, err)
	dir := b.TempDir()
	modes := []struct {
		name string
		sb   *sandbox.Sandbox
	}{{"unsandboxed", nil}, {"sandboxed", sb}}
	launchers := map[string]*launcher.Launcher{}
	for _, m := range modes {
		l, err := launcher.New(launcher.Config{Mode: launcher.ModeProcess, Redis: rdb, RedisURL: redisURL, Binary: exe,
			ConfigDir: filepath.Join(dir, "configs"), LogDir: filepath.Join(dir, "logs"), Name: "bench-" + m.name + "-" + uuid.NewString()[:8],
			Sandbox: m.sb, SandboxDir: filepath.Join(dir, "sandboxes")})
		require.NoError(b, err)
		require.NoError(b, l.Start(context.Background()))
		b.Cleanup(func() { _ = l.Close() })
		launchers[m.name] = l
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

	took := map[string][]float64{}
	b.ResetTimer()
	for range b.N {
		for _, m := range modes {
			l := launchers[m.name]
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
		l := launchers[m.name]
		id, _ := start(l)
		waitFor(b, rdb, id, protocol.EventTurnCompleted)
		time.Sleep(500 * time.Millisecond)
		pid, ok := l.PID(id)
		require.True(b, ok)
		rss, pss, n := treeMemory(pid)
		b.ReportMetric(float64(rss)/1024, "MiB-rss-idle-"+m.name)
		b.ReportMetric(float64(pss)/1024, "MiB-pss-idle-"+m.name)
		b.ReportMetric(float64(n), "processes-idle-"+m.name)
		require.NoError(b, l.Stop(id))
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

// treeMemory sums the RSS and PSS (KiB) of pid and its descendants.
func treeMemory(pid int) (rss, pss int64, n int) {
	for _, p := range append([]int{pid}, descendants(pid)...) {
		f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", p))
		if err != nil {
			continue
		}
		n++
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 2 {
				continue
			}
			v, _ := strconv.ParseInt(fields[1], 10, 64)
			switch fields[0] {
			case "Rss:":
				rss += v
			case "Pss:":
				pss += v
			}
		}
		f.Close()
	}
	return rss, pss, n
}
