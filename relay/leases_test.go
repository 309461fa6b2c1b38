package relay_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/relay"
)

// TestLeasesInBatches takes the leases of many listed sessions in atomic
// batches, and hands them all back on a clean stop.
func TestLeasesInBatches(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	// Opening the bucket again keeps atomic batches on.
	kv, err := relay.SessionsKV(ctx, e.js)
	require.NoError(t, err)
	e.sessions = kv
	s, err := e.js.Stream(ctx, "KV_"+relay.SessionsBucket)
	require.NoError(t, err)
	require.True(t, s.CachedInfo().Config.AllowAtomicPublish)

	ids := newSessions(1200)
	e.activate(ids...)
	p := e.start("relay-a", nil)
	require.Eventually(t, func() bool { return len(p.relay.Held()) == len(ids) }, wait, 10*time.Millisecond)
	batched := 0
	for _, id := range ids {
		m, err := s.GetLastMsgForSubject(ctx, "$KV."+relay.SessionsBucket+"."+id)
		require.NoError(t, err)
		if m.Header.Get("Nats-Batch-Id") != "" {
			batched++
		}
	}
	t.Logf("%d of %d leases taken in batches", batched, len(ids))
	assert.Positive(t, batched, "leases should be taken in batches")

	p.stop()
	checkReleased(t, kv, ids)
}

// TestLeasesWithoutBatches takes leases one by one where the bucket does not
// take atomic batches, as on a server before 2.12.
func TestLeasesWithoutBatches(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s, err := e.js.Stream(ctx, "KV_"+relay.SessionsBucket)
	require.NoError(t, err)
	cfg := s.CachedInfo().Config
	cfg.AllowAtomicPublish = false
	_, err = e.js.UpdateStream(ctx, cfg)
	require.NoError(t, err)

	ids := newSessions(50)
	e.activate(ids...)
	p := e.start("relay-a", func(c *relay.Config) { c.LeaseTTL = 10 * time.Second })
	require.Eventually(t, func() bool { return len(p.relay.Held()) == len(ids) }, wait, 10*time.Millisecond)
	require.NoError(t, xadd(ctx, e.rdb, ids[0], 0, 3))
	checkSequences(t, e.readEvents(3), map[string]int{ids[0]: 3})
	p.stop()
	checkReleased(t, e.sessions, ids)
}

// checkReleased checks every session's lease is free.
func checkReleased(t *testing.T, kv jetstream.KeyValue, ids []string) {
	t.Helper()
	ctx := context.Background()
	for _, id := range ids {
		entry, err := kv.Get(ctx, id)
		require.NoError(t, err)
		var rec relay.SessionRecord
		require.NoError(t, json.Unmarshal(entry.Value(), &rec))
		require.Empty(t, rec.Owner, "session %s: the lease should be handed back on a clean stop", id)
	}
}
