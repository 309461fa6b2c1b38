package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
)

// TestOutboundCarriesTheTraceparent writes a traced command's traceparent
// into its Redis entry, and none for a command without a valid one.
func TestOutboundCarriesTheTraceparent(t *testing.T) {
	e := newEnv(t)
	id := uuid.NewString()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traced := bus.Envelope{ID: uuid.NewString(), Type: "pause", Aggregate: "session", AggregateID: id}
	m, err := bus.NewMsg(bus.WithTraceparent(context.Background(), tp), bus.SidecarCommandSubject(id, "pause"), traced)
	require.NoError(t, err)
	_, err = e.js.PublishMsg(context.Background(), m)
	require.NoError(t, err)
	forged := bus.Envelope{ID: uuid.NewString(), Type: "resume", Aggregate: "session", AggregateID: id}
	m, err = bus.NewMsg(context.Background(), bus.SidecarCommandSubject(id, "resume"), forged)
	require.NoError(t, err)
	m.Header.Set(bus.HeaderTraceparent, "00-not-a-trace")
	_, err = e.js.PublishMsg(context.Background(), m)
	require.NoError(t, err)

	e.start("relay-a", nil)
	require.Eventually(t, func() bool { return len(commandEntries(t, e.rdb, id)) == 2 }, wait, 20*time.Millisecond)
	entries := commandEntries(t, e.rdb, id)
	assert.Equal(t, tp, entries[0].Values["traceparent"])
	assert.NotContains(t, entries[1].Values, "traceparent", "a malformed traceparent is not passed on")
}
