package bus_test

import (
	"context"
	"hash/fnv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
)

// TestALaneBufferKeepsOtherKeysMovingPastABusyOne holds the handler of key
// "a" while a's next message and then b's arrive: with a lane buffer, a's
// second message waits in a's lane and b's is handled; the held key keeps
// its order once released.
func TestALaneBufferKeepsOtherKeysMovingPastABusyOne(t *testing.T) {
	_, js, _ := bustest.Server(t)
	const lanes = 4
	// Two keys on different lanes, as the runner maps them.
	lane := func(k string) uint32 { h := fnv.New32a(); h.Write([]byte(k)); return h.Sum32() % lanes }
	a, b := "a", "b"
	for lane(b) == lane(a) {
		b += "b"
	}

	release := make(chan struct{})
	handled := make(chan string, 3)
	cfg := runnerConfig(t, "lanes", func(_ context.Context, m jetstream.Msg) error {
		if string(m.Data()) == "a1" {
			<-release
		}
		handled <- string(m.Data())
		return nil
	})
	cfg.Concurrency, cfg.LaneBuffer = lanes, 1
	cfg.OrderKey = func(m jetstream.Msg) string { return m.Headers().Get("Key") }
	start(t, js, cfg)

	publish := func(key, data string) {
		m := nats.NewMsg("agents.evt.session." + key + ".Happened")
		m.Header.Set("Key", key)
		m.Data = []byte(data)
		_, err := js.PublishMsg(context.Background(), m)
		require.NoError(t, err)
	}
	publish(a, "a1")
	publish(a, "a2")
	publish(b, "b1")
	select {
	case got := <-handled:
		assert.Equal(t, "b1", got, "b is handled while a is busy")
	case <-time.After(waitFor):
		close(release)
		t.Fatal("b waits behind the busy key a")
	}
	close(release)
	var rest []string
	for range 2 {
		rest = append(rest, <-handled)
	}
	assert.Equal(t, []string{"a1", "a2"}, rest, "a keeps its order")
	require.Eventually(t, settled(t, js, bus.StreamEvents, "lanes"), waitFor, 50*time.Millisecond)
}
