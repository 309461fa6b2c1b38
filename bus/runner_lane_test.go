package bus_test

import (
	"context"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
)

// TestOtherKeysMovePastABusyOne holds the handler of key "a" while a's
// next message and then b's arrive: a's second message waits in a's lane
// and b's is handled; the held key keeps its order once released.
func TestOtherKeysMovePastABusyOne(t *testing.T) {
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

// TestMessagesWaitingBehindABusyKeyStayWithTheirRunner holds the handler of
// key "a" for several ack waits while more of a's messages and then b's
// arrive, with no lane buffer and b on another lane: b is handled while a
// is busy, and a's waiting messages are kept alive, so the server hands
// none of them out again (a message it re-sent would be handled twice, or
// by the next runner only after its ack wait).
func TestMessagesWaitingBehindABusyKeyStayWithTheirRunner(t *testing.T) {
	_, js, _ := bustest.Server(t)
	const lanes = 2
	lane := func(k string) uint32 { h := fnv.New32a(); h.Write([]byte(k)); return h.Sum32() % lanes }
	a, b := "a", "b"
	for lane(b) == lane(a) {
		b += "b"
	}

	release := make(chan struct{})
	held := make(chan struct{})
	var mu sync.Mutex
	var handled []string
	deliveries := map[string]uint64{}
	cfg := runnerConfig(t, "waiting", func(_ context.Context, m jetstream.Msg) error {
		md, err := m.Metadata()
		require.NoError(t, err)
		mu.Lock()
		handled = append(handled, string(m.Data()))
		deliveries[string(m.Data())] = max(deliveries[string(m.Data())], md.NumDelivered)
		mu.Unlock()
		if string(m.Data()) == "a1" && md.NumDelivered == 1 {
			close(held)
			<-release
		}
		return nil
	})
	cfg.Concurrency, cfg.LaneBuffer = lanes, 0
	cfg.AckWait = time.Second
	cfg.OrderKey = func(m jetstream.Msg) string { return m.Headers().Get("Key") }
	start(t, js, cfg)
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	publish := func(key, data string) {
		m := nats.NewMsg("agents.evt.session." + key + ".Happened")
		m.Header.Set("Key", key)
		m.Data = []byte(data)
		_, err := js.PublishMsg(context.Background(), m)
		require.NoError(t, err)
	}
	publish(a, "a1")
	<-held
	for _, d := range []string{"a2", "a3", "a4"} {
		publish(a, d)
	}
	publish(b, "b1")
	seen := func(data string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return slices.Contains(handled, data)
		}
	}
	require.Eventually(t, seen("b1"), 20*time.Second, 20*time.Millisecond, "b waits behind the busy key a")
	// Several ack waits pass while a1's handler is held.
	assert.Never(t, func() bool {
		return consumerInfo(t, js, bus.StreamEvents, "waiting").NumRedelivered > 0
	}, 4*time.Second, 100*time.Millisecond, "messages waiting for their lane are handed out again")
	close(release)

	require.Eventually(t, seen("a4"), 20*time.Second, 20*time.Millisecond)
	require.Eventually(t, settled(t, js, bus.StreamEvents, "waiting"), waitFor, 50*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	var aOrder []string
	for _, d := range handled {
		if strings.HasPrefix(d, "a") {
			aOrder = append(aOrder, d)
		}
	}
	assert.Equal(t, []string{"a1", "a2", "a3", "a4"}, aOrder, "a's messages handled once each, in order")
	for d, n := range deliveries {
		assert.EqualValues(t, 1, n, "%s was delivered again", d)
	}
}
