package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
)

// TestThousandSessions relays 1,000 sessions of 100 events each: half of
// every stream is written before the relay starts, half while it runs.
func TestThousandSessions(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ids := newSessions(1000)
	t0 := time.Now()
	e.activate(ids...)
	t.Logf("activated in %s", time.Since(t0))
	writeAll := func(from, to int) {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(8)
		for _, id := range ids {
			g.Go(func() error { return xadd(gctx, e.rdb, id, from, to) })
		}
		require.NoError(t, g.Wait())
	}
	t0 = time.Now()
	writeAll(0, 50)
	t.Logf("written in %s", time.Since(t0))
	p := e.start("relay-a", nil)
	t0 = time.Now()
	require.Eventually(t, func() bool { return len(p.relay.Held()) == 1000 }, wait, 10*time.Millisecond)
	t.Logf("held in %s", time.Since(t0))
	writeAll(50, 100)

	want := map[string]int{}
	for _, id := range ids {
		want[id] = 100
	}
	got := e.readEvents(100_000)
	t.Logf("relayed in %s", time.Since(t0))
	checkSequences(t, got, want)
}
