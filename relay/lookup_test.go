package relay

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
)

// TestLastRelayedMany looks up where many sessions stopped at once and
// finds what looking them up one by one finds, also when the sessions have
// more subjects than one answer of the server holds.
func TestLastRelayedMany(t *testing.T) {
	_, js, _ := bustest.Server(t)
	ctx := context.Background()
	events, err := js.Stream(ctx, bus.StreamSidecarEvents)
	require.NoError(t, err)
	r := &Relay{js: js, events: events}

	ids := make([]string, lookupSessions+5)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	// Sessions with no event, with one type, and with many (30 types
	// over most of 40 sessions is more than the 1024 subjects one answer
	// holds), the last event written not being of the last type.
	for i, id := range ids[1:] {
		types := 30
		if i%10 == 0 {
			types = 1
		}
		for n := range types + 2 {
			typ := fmt.Sprintf("t%d", (n*7)%types)
			m := nats.NewMsg(bus.SidecarEventSubject(id, typ))
			m.Header.Set(HeaderRedisEntry, fmt.Sprintf("1700000000000-%d", n))
			m.Data = []byte("{}")
			_, err := js.PublishMsgAsync(m)
			require.NoError(t, err)
		}
	}
	<-js.PublishAsyncComplete()
	got, err := r.lastRelayedMany(ctx, ids)
	require.NoError(t, err)
	require.Len(t, got, len(ids))
	for _, id := range ids {
		want, err := r.lastRelayed(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, got[id], "session %s", id)
	}
	require.Empty(t, got[ids[0]])
}
