package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/relay"
)

func TestTrim(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()

	// group reads the first read entries of key and acknowledges the first acked.
	group := func(t *testing.T, key, name string, read, acked int) {
		require.NoError(t, rdb.XGroupCreate(ctx, key, name, "0").Err())
		if read == 0 {
			return
		}
		res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: name, Consumer: "c", Streams: []string{key, ">"}, Count: int64(read), Block: -1}).Result()
		require.NoError(t, err)
		var ids []string
		for _, m := range res[0].Messages[:acked] {
			ids = append(ids, m.ID)
		}
		if len(ids) > 0 {
			require.NoError(t, rdb.XAck(ctx, key, name, ids...).Err())
		}
	}
	type grp struct {
		name        string
		read, acked int
	}
	tests := []struct {
		name   string
		groups []grp
		keep   int64
		// first is the index of the oldest entry left of 100.
		first int
	}{
		{name: "no group: unknown readers, nothing trimmed", keep: 0, first: 0},
		{name: "all acknowledged", groups: []grp{{"relay", 100, 100}}, keep: 0, first: 100},
		{name: "all acknowledged, keeping history", groups: []grp{{"relay", 100, 100}}, keep: 10, first: 90},
		{name: "acknowledged up to the last read", groups: []grp{{"relay", 70, 70}}, keep: 0, first: 70},
		{name: "oldest pending entry is kept", groups: []grp{{"relay", 100, 60}}, keep: 0, first: 60},
		{name: "slowest group bounds", groups: []grp{{"relay", 100, 100}, {"audit", 50, 30}}, keep: 5, first: 25},
		{name: "group that read nothing", groups: []grp{{"relay", 100, 100}, {"late", 0, 0}}, keep: 0, first: 0},
		{name: "less history than asked", groups: []grp{{"relay", 100, 8}}, keep: 10, first: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := uuid.NewString()
			key := relay.EventsKey(id)
			require.NoError(t, xadd(ctx, rdb, id, 0, 100))
			all, err := rdb.XRange(ctx, key, "-", "+").Result()
			require.NoError(t, err)
			for _, g := range tt.groups {
				group(t, key, g.name, g.read, g.acked)
			}
			_, err = relay.Trim(ctx, rdb, id, tt.keep)
			require.NoError(t, err)
			left, err := rdb.XRange(ctx, key, "-", "+").Result()
			require.NoError(t, err)
			require.Len(t, left, 100-tt.first)
			if tt.first < 100 {
				assert.Equal(t, all[tt.first].ID, left[0].ID, "oldest entry left")
			}
		})
	}
}

// TestRelayTrims checks the relay trims the streams it relays, and only
// what every group acknowledged.
func TestRelayTrims(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	id := uuid.NewString()
	key := relay.EventsKey(id)
	// Another reader of the stream that is behind.
	require.NoError(t, e.rdb.XGroupCreateMkStream(ctx, key, "audit", "0").Err())
	require.NoError(t, xadd(ctx, e.rdb, id, 0, 100))
	_, err := e.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "audit", Consumer: "c", Streams: []string{key, ">"}, Count: 40, Block: -1}).Result()
	require.NoError(t, err)
	all, err := e.rdb.XRange(ctx, key, "-", "+").Result()
	require.NoError(t, err)

	e.activate(id)
	e.start("relay-a", func(c *relay.Config) {
		c.TrimInterval = 50 * time.Millisecond
		c.TrimKeep = 3
	})
	e.readEvents(100)
	require.Eventually(t, func() bool {
		n, err := e.rdb.XLen(ctx, key).Result()
		return err == nil && n == 100
	}, wait, 20*time.Millisecond)
	// The audit group still has everything pending: nothing may go.
	time.Sleep(200 * time.Millisecond)
	first, err := e.rdb.XRange(ctx, key, "-", "+").Result()
	require.NoError(t, err)
	assert.Equal(t, all[0].ID, first[0].ID)

	// Once it acknowledges 40, all but 3 of those go.
	var ids []string
	for _, m := range all[:40] {
		ids = append(ids, m.ID)
	}
	require.NoError(t, e.rdb.XAck(ctx, key, "audit", ids...).Err())
	require.Eventually(t, func() bool {
		left, err := e.rdb.XRange(ctx, key, "-", "+").Result()
		return err == nil && len(left) == 63 && left[0].ID == all[37].ID
	}, wait, 20*time.Millisecond)
}
