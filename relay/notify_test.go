package relay_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/relay"
)

// TestNotifiedReads relays events the relay learns of only from keyspace
// notifications: its sweep of every stream comes once, at the start, before
// anything is written.
func TestNotifiedReads(t *testing.T) {
	e := newEnv(t)
	ids := newSessions(50)
	e.activate(ids...)
	p := e.start("relay-a", func(c *relay.Config) { c.Sweep = time.Hour })
	require.Eventually(t, func() bool { return len(p.relay.Held()) == len(ids) && p.relay.Notifying() }, wait, 10*time.Millisecond)

	ctx := context.Background()
	want := map[string]int{}
	for i, id := range ids {
		require.NoError(t, xadd(ctx, e.rdb, id, 0, 1+i%5))
		want[id] = 1 + i%5
	}
	checkSequences(t, e.readEvents(150), want)
	require.True(t, p.relay.Notifying())
}

// TestMissedNotification puts an entry into a held stream without the
// notification an XADD publishes (COPY over the key publishes copy_to
// instead), as a notification lost on the way would: the sweep relays it.
func TestMissedNotification(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	id := newSessions(1)[0]
	e.activate(id)
	p := e.start("relay-a", func(c *relay.Config) { c.Sweep = 300 * time.Millisecond })
	require.Eventually(t, func() bool { return len(p.relay.Held()) == 1 && p.relay.Notifying() }, wait, 10*time.Millisecond)
	require.NoError(t, xadd(ctx, e.rdb, id, 0, 1))
	e.readEvents(1)
	require.Eventually(t, func() bool {
		pending, err := e.rdb.XPending(ctx, relay.EventsKey(id), relay.DefaultGroup).Result()
		return err == nil && pending.Count == 0
	}, wait, 10*time.Millisecond)

	// A copy of the stream, its consumer group included, gets the entry;
	// the copy then replaces the session's stream.
	key, scratch := relay.EventsKey(id), relay.EventsKey(id)+":scratch"
	dump, err := e.rdb.Dump(ctx, key).Result()
	require.NoError(t, err)
	require.NoError(t, e.rdb.Restore(ctx, scratch, 0, dump).Err())
	require.NoError(t, e.rdb.XAdd(ctx, &redis.XAddArgs{Stream: scratch, Values: []any{
		"type", "usage_update", "data", `{"n":1}`, "ts", strconv.FormatInt(time.Now().UnixMilli(), 10),
	}}).Err())
	require.NoError(t, e.rdb.Copy(ctx, scratch, key, 0, true).Err())
	require.NoError(t, e.rdb.Del(ctx, scratch).Err())

	checkSequences(t, e.readEvents(2), map[string]int{id: 2})
	require.True(t, p.relay.Notifying(), "the entry should have come through the sweep, not through reading every stream")
}

// TestWithoutNotifications runs the relay on a Redis server with keyspace
// notifications off: it reads every stream instead, and switches to
// notifications once they are turned on.
func TestWithoutNotifications(t *testing.T) {
	e := newEnv(t)
	e.privateRedis()
	ctx := context.Background()
	require.NoError(t, e.rdb.ConfigSet(ctx, "notify-keyspace-events", "").Err())
	ids := newSessions(20)
	e.activate(ids...)
	p := e.start("relay-a", func(c *relay.Config) { c.Sweep = 300 * time.Millisecond })
	require.Eventually(t, func() bool { return len(p.relay.Held()) == len(ids) }, wait, 10*time.Millisecond)
	want := map[string]int{}
	for _, id := range ids {
		require.NoError(t, xadd(ctx, e.rdb, id, 0, 10))
		want[id] = 10
	}
	checkSequences(t, e.readEvents(200), want)
	require.False(t, p.relay.Notifying())

	require.NoError(t, e.rdb.ConfigSet(ctx, "notify-keyspace-events", "Et").Err())
	require.Eventually(t, p.relay.Notifying, wait, 10*time.Millisecond)
	for _, id := range ids {
		require.NoError(t, xadd(ctx, e.rdb, id, 10, 20))
		want[id] = 20
	}
	checkSequences(t, e.readEvents(400), want)
}

// relayACL is the Redis ACL of a relay's user as relay/README.md gives it.
const relayACL = "on >relay-secret ~agent:* &__keyevent@0__:xadd +@stream +@scripting +set +exists +del +subscribe +ping +client|id +client|unblock +hello +auth"

// TestRelayRedisUser runs the relay as a Redis user with only the
// permissions relay/README.md lists: it reads with notifications, relays
// events, writes commands and trims.
func TestRelayRedisUser(t *testing.T) {
	e := newEnv(t)
	srv := e.privateRedis()
	ctx := context.Background()
	require.NoError(t, e.rdb.Do(ctx, append([]any{"ACL", "SETUSER", "relay"}, anySlice(strings.Fields(relayACL))...)...).Err())
	e.redisURL = strings.Replace(srv.URL(), "redis://", "redis://relay:relay-secret@", 1)

	ids := newSessions(5)
	e.activate(ids...)
	p := e.start("relay-a", func(c *relay.Config) {
		c.TrimInterval = 100 * time.Millisecond
		c.TrimKeep = 2
	})
	require.Eventually(t, func() bool { return len(p.relay.Held()) == len(ids) && p.relay.Notifying() }, wait, 10*time.Millisecond)
	want := map[string]int{}
	for _, id := range ids {
		require.NoError(t, xadd(ctx, e.rdb, id, 0, 10))
		want[id] = 10
	}
	checkSequences(t, e.readEvents(50), want)

	cmd := bus.Envelope{ID: uuid.NewString(), Type: "pause", Aggregate: "session", AggregateID: ids[0], OccurredAt: time.Now()}
	publishCommand(t, e.js, ids[0], cmd, "")
	require.Eventually(t, func() bool { return len(commandEntries(t, e.rdb, ids[0])) == 1 }, wait, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		n, err := e.rdb.XLen(ctx, relay.EventsKey(ids[0])).Result()
		return err == nil && n == 2
	}, wait, 20*time.Millisecond, "the relay should trim what it relayed")
}

func anySlice(s []string) []any {
	a := make([]any, len(s))
	for i, v := range s {
		a[i] = v
	}
	return a
}
