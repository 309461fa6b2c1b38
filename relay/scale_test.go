package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/relay"
)

// TestTwoRelaysShareSessions runs two relays over 100 sessions, kills one
// mid-stream and checks the other takes its sessions over within a bounded
// time, with every event arriving once and in order.
func TestTwoRelaysShareSessions(t *testing.T) {
	e := newEnv(t)
	ids := newSessions(100)
	e.activate(ids...)
	ttl := func(c *relay.Config) { c.LeaseTTL = time.Second }
	a := e.start("relay-a", ttl)
	b := e.start("relay-b", ttl)

	// Both join and split the sessions between them.
	require.Eventually(t, func() bool {
		ha, hb := len(a.relay.Held()), len(b.relay.Held())
		return ha+hb == 100 && ha > 20 && hb > 20
	}, wait, 20*time.Millisecond, "the relays should share the sessions")
	t.Logf("relay-a holds %d sessions, relay-b %d", len(a.relay.Held()), len(b.relay.Held()))

	const per = 100
	waitWriters := streamSessions(t, e.redisURL, ids, per, 20*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	killed := time.Now()
	a.kill()
	require.Eventually(t, func() bool { return len(b.relay.Held()) == 100 }, wait, 10*time.Millisecond)
	took := time.Since(killed)
	t.Logf("relay-b held every session %s after relay-a died", took)
	// The bound is the lease plus a heartbeat; allow for a slow machine.
	assert.Less(t, took, 10*time.Second)
	waitWriters()

	want := map[string]int{}
	for _, id := range ids {
		want[id] = per
	}
	checkSequences(t, e.readEvents(len(ids)*per), want)

	// A relay stopped cleanly hands its sessions over at once.
	c := e.start("relay-c", ttl)
	require.Eventually(t, func() bool { return len(c.relay.Held()) > 20 }, wait, 10*time.Millisecond)
	c.stop()
	require.Eventually(t, func() bool { return len(b.relay.Held()) == 100 }, wait, 10*time.Millisecond)
	ctx := context.Background()
	for _, id := range ids {
		require.NoError(t, xadd(ctx, e.rdb, id, per, per+10))
		want[id] = per + 10
	}
	checkSequences(t, e.readEvents(len(ids)*(per+10)), want)
}
