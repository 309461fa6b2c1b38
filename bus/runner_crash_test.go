package bus_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
)

// TestADeliveryWhoseProcessDiedComesBackAfterTheAckWait takes a raw event
// on the acl consumer, as its files define it, the way a process does that
// dies on it again and again: five deliveries handed back and a sixth
// never settled. The next runner handles it after the short ack wait, not
// after the retry schedule's long tail (ten minutes for a sixth delivery
// when the schedule is the server's backoff, which also sets the ack
// deadline of each delivery).
func TestADeliveryWhoseProcessDiedComesBackAfterTheAckWait(t *testing.T) {
	srv, js, _ := bustest.Server(t)
	ctx := context.Background()
	_, err := js.Publish(ctx, bus.SidecarEventSubject("s1", "assistant_message"), []byte(`{}`))
	require.NoError(t, err)

	// The process that dies: a connection of its own, pulling in the
	// consumer's pinned group like the runner does.
	dying, djs := bustest.Connect(t, srv)
	cons, err := djs.Consumer(ctx, bus.StreamSidecarEvents, "acl")
	require.NoError(t, err)
	it, err := cons.Messages(jetstream.PullPriorityGroup("ordered"), jetstream.PullMaxMessages(1))
	require.NoError(t, err)
	for n := uint64(1); ; n++ {
		m, err := it.Next(jetstream.NextMaxWait(waitFor))
		require.NoError(t, err)
		md, err := m.Metadata()
		require.NoError(t, err)
		require.Equal(t, n, md.NumDelivered)
		if n == 6 {
			break
		}
		require.NoError(t, m.Nak())
	}
	dying.Close()
	// An operator moves the pin at once after a crash (`nats consumer
	// unpin`) instead of waiting out the priority timeout.
	stream, err := js.Stream(ctx, bus.StreamSidecarEvents)
	require.NoError(t, err)
	require.NoError(t, stream.UnpinConsumer(ctx, "acl", "ordered"))

	var mu sync.Mutex
	var delivered []uint64
	start(t, js, bus.RunnerConfig{
		Stream: bus.StreamSidecarEvents, Consumer: "acl",
		Handler: func(_ context.Context, m jetstream.Msg) error {
			md, err := m.Metadata()
			if err == nil {
				mu.Lock()
				delivered = append(delivered, md.NumDelivered)
				mu.Unlock()
			}
			return err
		},
		Concurrency: 4, OrderKey: bus.BySidecarSession, IdleHeartbeat: time.Second, Logger: testLogger(t),
	})
	// Far below the ten minutes, and well above the ten-second ack wait.
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(delivered) > 0
	}, time.Minute, 50*time.Millisecond, "the crashed delivery did not come back")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []uint64{7}, delivered)
}

// TestRunRetriesAfterTheRetryBackoffOfTheConsumerFile fails a handler once
// on a consumer whose file says retry_backoff 10ms, while the runner's own
// Backoff is an hour: the file's schedule wins.
func TestRunRetriesAfterTheRetryBackoffOfTheConsumerFile(t *testing.T) {
	t.Parallel()
	_, js, _ := bustest.Server(t)
	defs, err := bus.LoadDefinitions(fstest.MapFS{
		"streams/AGENTS_EVENTS.json": {Data: []byte(`{"name":"AGENTS_EVENTS","subjects":["agents.evt.>"],"storage":"file","retention":"limits"}`)},
		"consumers/AGENTS_EVENTS/scheduled.json": {Data: []byte(`{
			"durable_name": "scheduled", "description": "from its file", "filter_subject": "agents.evt.session.>",
			"ack_policy": "explicit", "ack_wait": 10000000000, "retry_backoff": [10000000], "max_deliver": 3}`)},
	})
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{10 * time.Millisecond}, defs.RetryBackoff(bus.StreamEvents, "scheduled"))
	attempts := newCounter()
	cfg := runnerConfig(t, "scheduled", func(_ context.Context, m jetstream.Msg) error {
		if attempts.add(m) == 1 {
			return errors.New("failing once")
		}
		return nil
	})
	cfg.Definitions, cfg.FilterSubjects, cfg.Backoff = defs, nil, []time.Duration{time.Hour}
	start(t, js, cfg)

	publishEvents(t, js, "scheduled", 1, 1)
	require.Eventually(t, func() bool { return attempts.get("scheduled-0") == 2 }, 15*time.Second, 10*time.Millisecond,
		"the retry waits for the runner's backoff, not the file's")
	assert.Empty(t, consumerInfo(t, js, bus.StreamEvents, "scheduled").Config.BackOff, "the schedule stays off the server")
}
