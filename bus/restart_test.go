package bus_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
)

// TestRunSurvivesServerRestart publishes 10,000 messages from 100
// publishers while a runner consumes them, restarts the server on the same
// port and store midway, and checks that every message is handled.
func TestRunSurvivesServerRestart(t *testing.T) {
	t.Parallel()
	const (
		publishers = 100
		perPub     = 100
		batch      = 50
		total      = publishers * perPub
	)
	srv, js, _ := bustest.Server(t)
	seen := newCounter()
	cfg := runnerConfig(t, "restart", func(_ context.Context, m jetstream.Msg) error {
		seen.add(m)
		return nil
	})
	cfg.Concurrency = 4
	// Messages on their way to the runner when the server stopped are
	// redelivered after the ack wait.
	cfg.AckWait = 2 * time.Second
	run := start(t, js, cfg)

	pub := newPublisher(t, js)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			msgs := eventMsgs(t, fmt.Sprintf("p%d", p), perPub, 5)
			for i := 0; i < len(msgs); i += batch {
				// A publisher retries until the server has the batch;
				// the ids make a resend harmless.
				for {
					err := pub.PublishMsgs(ctx, msgs[i:i+batch])
					if err == nil || ctx.Err() != nil {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}

	require.Eventually(t, func() bool { return seen.distinct() >= total/4 }, waitFor, 5*time.Millisecond)
	handledBefore := seen.distinct()
	srv = bustest.Restart(t, srv)
	t.Logf("restarted the server after %d of %d messages were handled", handledBefore, total)

	wg.Wait()
	require.NoError(t, ctx.Err(), "publishers finished")
	require.Eventually(t, func() bool { return seen.distinct() == total }, 2*waitFor, 10*time.Millisecond,
		"handled %d of %d", seen.distinct(), total)
	assert.Less(t, handledBefore, total, "the restart happened mid-stream")
	assert.EqualValues(t, total, streamMsgs(t, js, bus.StreamEvents), "each message stored once")
	assert.True(t, srv.JetStreamEnabled())
	require.NoError(t, run.stop(t))
}

// TestRunResumesAfterIdleRestart restarts the server while a runner on a
// work queue waits for messages: the runner must not stall.
func TestRunResumesAfterIdleRestart(t *testing.T) {
	t.Parallel()
	srv, js, _ := bustest.Server(t)
	seen := newCounter()
	run := start(t, js, bus.RunnerConfig{
		Stream:        bus.StreamCommands,
		Consumer:      "commands",
		IdleHeartbeat: time.Second,
		Logger:        testLogger(t),
		Handler: func(_ context.Context, m jetstream.Msg) error {
			seen.add(m)
			return nil
		},
	})
	require.Eventually(t, func() bool {
		c, err := js.Consumer(context.Background(), bus.StreamCommands, "commands")
		return err == nil && c.CachedInfo().NumWaiting > 0
	}, waitFor, 10*time.Millisecond, "the runner waits with a pull request")

	bustest.Restart(t, srv)

	pub := newPublisher(t, js)
	for i := range 100 {
		env := envelope(t, fmt.Sprintf("cmd-%d", i))
		require.Eventually(t, func() bool {
			_, err := pub.Publish(context.Background(), bus.CommandSubject("session", "pause"), env)
			return err == nil
		}, waitFor, 50*time.Millisecond)
	}
	require.Eventually(t, func() bool { return seen.distinct() == 100 }, waitFor, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		s, err := js.Stream(context.Background(), bus.StreamCommands)
		return err == nil && s.CachedInfo().State.Msgs == 0
	}, waitFor, 10*time.Millisecond, "a work queue drops what was acknowledged")
	require.NoError(t, run.stop(t))
}
