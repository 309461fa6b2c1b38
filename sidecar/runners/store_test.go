package runners

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus/bustest"
)

func openStore(t *testing.T, ttl time.Duration) *Store {
	t.Helper()
	_, js, _ := bustest.Server(t)
	s, err := Open(context.Background(), js, ttl)
	require.NoError(t, err)
	return s
}

// TestExactlyOnePlacerAssignsASession races placers writing the same
// session's assignment from the revision they read: one wins, the others
// are refused.
func TestExactlyOnePlacerAssignsASession(t *testing.T) {
	t.Parallel()
	s := openStore(t, time.Second)
	ctx := context.Background()
	for _, rev := range []uint64{0, 1} { // a first assignment, then a reassignment
		if rev > 0 {
			_, rev, _ = s.Assignment(ctx, "s1")
		}
		var wins sync.Map
		var wg sync.WaitGroup
		for _, runner := range []string{"a", "b", "c", "d"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.Put(ctx, Assignment{SessionID: "s1", Runner: runner, Gen: rev + 1}, rev)
				if err == nil {
					wins.Store(runner, true)
				} else {
					assert.True(t, Conflict(err), "%v", err)
				}
			}()
		}
		wg.Wait()
		n := 0
		wins.Range(func(_, _ any) bool { n++; return true })
		assert.Equal(t, 1, n, "exactly one placer assigns the session")
	}
	require.NoError(t, s.Remove(ctx, "s1"))
	a, rev, err := s.Assignment(ctx, "s1")
	require.NoError(t, err)
	assert.Zero(t, rev)
	assert.Empty(t, a.SessionID)
	_, err = s.Put(ctx, Assignment{SessionID: "s1", Runner: "a"}, 0)
	assert.NoError(t, err, "a removed assignment can be made again")
}

// TestALeaseNotRenewedGoesAway renews one lease and lets another lapse.
func TestALeaseNotRenewedGoesAway(t *testing.T) {
	t.Parallel()
	s := openStore(t, time.Second)
	ctx := context.Background()
	require.NoError(t, s.Renew(ctx, Lease{Name: "dead", Capacity: 1}))
	require.NoError(t, s.Renew(ctx, Lease{Name: "alive", Capacity: 2}))
	leases, err := s.Leases(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, leases["alive"].Capacity)
	require.Contains(t, leases, "dead")
	require.Eventually(t, func() bool {
		require.NoError(t, s.Renew(ctx, Lease{Name: "alive", Capacity: 2}))
		leases, err := s.Leases(ctx)
		require.NoError(t, err)
		_, dead := leases["dead"]
		_, alive := leases["alive"]
		return !dead && alive
	}, 30*time.Second, 100*time.Millisecond, "the lease not renewed stays")
	require.NoError(t, s.Leave(ctx, "alive"))
	leases, err = s.Leases(ctx)
	require.NoError(t, err)
	assert.Empty(t, leases)
}
