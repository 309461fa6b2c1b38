package relay_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/relay"
)

// TestBadEntries checks that entries breaking the Redis contract are
// forwarded as type "invalid" with their raw fields, in order with the
// others, and that the relay goes on.
func TestBadEntries(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	id := uuid.NewString()
	e.activate(id)
	e.start("relay-a", nil)

	tests := []struct {
		name   string
		fields []any
		typ    string
		err    string
	}{
		{name: "valid", fields: []any{"type", "assistant_message", "data", `{"text":"hi"}`, "ts", "1700000000000"}, typ: "assistant_message"},
		{name: "missing type", fields: []any{"data", `{}`, "ts", "1700000000000"}, typ: relay.TypeInvalid, err: "missing type"},
		{name: "unknown type", fields: []any{"type", "dance", "data", `{}`, "ts", "1700000000000"}, typ: relay.TypeInvalid, err: `unknown type "dance"`},
		{name: "type not a token", fields: []any{"type", "a.b>", "data", `{}`, "ts", "1"}, typ: relay.TypeInvalid, err: `unknown type "a.b>"`},
		{name: "data not JSON", fields: []any{"type", "tool_result", "data", `{oops`, "ts", "1700000000000"}, typ: relay.TypeInvalid, err: "data is not JSON"},
		{name: "data not an object", fields: []any{"type", "tool_result", "data", `[1,2]`, "ts", "1700000000000"}, typ: relay.TypeInvalid, err: "data is not a JSON object"},
		{name: "missing data", fields: []any{"type", "pause_ack", "ts", "1700000000000"}, typ: relay.TypeInvalid, err: "missing data"},
		{name: "missing ts", fields: []any{"type", "pause_ack", "data", `{}`}, typ: relay.TypeInvalid, err: "missing ts"},
		{name: "ts not a number", fields: []any{"type", "pause_ack", "data", `{}`, "ts", "yesterday"}, typ: relay.TypeInvalid, err: `ts "yesterday" is not Unix milliseconds`},
		{name: "too large to forward", fields: []any{"type", "tool_result", "data", `{"x":"` + strings.Repeat("x", 2<<20) + `"}`, "ts", "1700000000000"}, typ: relay.TypeInvalid,
			err: fmt.Sprintf("entry of %d bytes exceeds the message size limit of %d", 2<<20+136, 1<<20)},
		{name: "valid after the bad ones", fields: []any{"type", "session_started", "data", `{"engine_session_id":"e1"}`, "ts", "1700000000001", "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, typ: "session_started"},
	}
	for _, tt := range tests {
		require.NoError(t, e.rdb.XAdd(ctx, &redis.XAddArgs{Stream: relay.EventsKey(id), Values: tt.fields}).Err())
	}
	got := e.readEvents(len(tests))
	evs := got.bySess[id]
	require.Len(t, evs, len(tests))
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := evs[i]
			assert.Equal(t, tt.typ, ev.Type)
			assert.Equal(t, tt.err, ev.Error)
			if tt.err == "" {
				assert.Nil(t, ev.Fields)
				assert.NotEmpty(t, ev.Data)
				return
			}
			assert.Nil(t, ev.Data)
			want := map[string]string{}
			for j := 0; j < len(tt.fields); j += 2 {
				v := tt.fields[j+1].(string)
				want[tt.fields[j].(string)] = v[:min(len(v), 1024)]
			}
			assert.Equal(t, want, ev.Fields)
		})
	}
	assert.Equal(t, int64(1700000000001), evs[len(evs)-1].TS)
	assert.JSONEq(t, `{"engine_session_id":"e1"}`, string(evs[len(evs)-1].Data))
}

// TestDrain checks how a session ends: on Deactivate the relay forwards
// what is left, then stops and removes the session from relay_sessions;
// Activate brings it back. A session_end does not end the relaying: the
// control plane decides whether the session is over (it may refuse the
// entry), and deactivates it when it is.
func TestDrain(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ids := newSessions(2)
	byCall, byEvent := ids[0], ids[1]
	e.activate(ids...)
	p := e.start("relay-a", nil)
	require.NoError(t, xadd(ctx, e.rdb, byCall, 0, 50))
	require.NoError(t, xadd(ctx, e.rdb, byEvent, 0, 50))
	require.NoError(t, e.rdb.XAdd(ctx, &redis.XAddArgs{Stream: relay.EventsKey(byEvent), Values: []any{
		"type", "session_end", "data", `{"success":true,"exit_code":0}`, "ts", "1700000000000",
	}}).Err())
	require.NoError(t, relay.Deactivate(ctx, e.sessions, byCall))

	gone := func(id string) func() bool {
		return func() bool {
			_, err := e.sessions.Get(ctx, id)
			return err != nil && !contains(p.relay.Held(), id)
		}
	}
	require.Eventually(t, gone(byCall), wait, 20*time.Millisecond)
	got := e.readEvents(101)
	assert.Len(t, got.bySess[byCall], 50)
	assert.Len(t, got.bySess[byEvent], 51)
	// What the sidecar writes after its session_end is still relayed.
	require.NoError(t, xadd(ctx, e.rdb, byEvent, 51, 52))
	got = e.readEvents(102)
	assert.Len(t, got.bySess[byEvent], 52)
	assert.True(t, contains(p.relay.Held(), byEvent), "a session_end alone does not stop the relaying")
	require.NoError(t, relay.Deactivate(ctx, e.sessions, byEvent))
	require.Eventually(t, gone(byEvent), wait, 20*time.Millisecond)

	// A drained session that is activated again is relayed from where it stopped.
	require.NoError(t, xadd(ctx, e.rdb, byCall, 50, 60))
	e.activate(byCall)
	want := map[string]int{byCall: 60}
	got = e.readEvents(112)
	delete(got.bySess, byEvent)
	got.msgs -= 52
	checkSequences(t, got, want)

	// Deactivating a session that is not relayed is a no-op.
	require.NoError(t, relay.Deactivate(ctx, e.sessions, uuid.NewString()))
	require.Error(t, relay.Activate(ctx, e.sessions, "Not.A.Session"))
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// TestBrokenStreamKey checks that a session whose key is not a stream is
// set aside without holding the other sessions up, and relayed once its key
// is fixed.
func TestBrokenStreamKey(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ids := newSessions(3)
	broken := ids[0]
	require.NoError(t, e.rdb.Set(ctx, relay.EventsKey(broken), "not a stream", 0).Err())
	e.activate(ids...)
	e.start("relay-a", nil)
	for _, id := range ids[1:] {
		require.NoError(t, xadd(ctx, e.rdb, id, 0, 20))
	}
	got := e.readEvents(40)
	checkSequences(t, got, map[string]int{ids[1]: 20, ids[2]: 20})

	require.NoError(t, e.rdb.Del(ctx, relay.EventsKey(broken)).Err())
	require.NoError(t, xadd(ctx, e.rdb, broken, 0, 20))
	got = e.readEvents(60)
	checkSequences(t, got, map[string]int{ids[1]: 20, ids[2]: 20, broken: 20})
}
