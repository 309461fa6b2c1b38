package bus_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
)

func TestRunDeadLetters(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		handler   func(jetstream.Msg) error
		attempts  int
		errorText string
	}{
		{
			name:      "after max deliveries",
			handler:   func(jetstream.Msg) error { return errors.New("still failing\nsecond line") },
			attempts:  3,
			errorText: "still failing second line",
		},
		{
			name:      "permanent error at once",
			handler:   func(jetstream.Msg) error { return bus.Permanent(errors.New("malformed")) },
			attempts:  1,
			errorText: "permanent: malformed",
		},
		{
			name:      "panic counts as an error",
			handler:   func(jetstream.Msg) error { panic("boom") },
			attempts:  3,
			errorText: "bus: handler panicked: boom",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, js, _ := bustest.Server(t)
			ctx := context.Background()
			attempts := newCounter()
			cfg := runnerConfig(t, "dlq-test", func(_ context.Context, m jetstream.Msg) error {
				attempts.add(m)
				if string(m.Data()) == "good" {
					return nil
				}
				return tt.handler(m)
			})
			cfg.MaxDeliver = 3
			start(t, js, cfg)

			bad := nats.NewMsg(bus.EventSubject("session", "s1", "bad"))
			bad.Header.Set("Nats-Msg-Id", "bad-1")
			bad.Header.Set("Agents-Type", "bad")
			bad.Header.Set("traceparent", traceparent)
			bad.Data = []byte(`{"broken":`)
			_, err := js.PublishMsg(ctx, bad)
			require.NoError(t, err)

			dlq, err := js.Stream(ctx, bus.StreamDLQ)
			require.NoError(t, err)
			var dead *jetstream.RawStreamMsg
			require.Eventually(t, func() bool {
				dead, err = dlq.GetLastMsgForSubject(ctx, "agents.dlq.dlq-test")
				return err == nil
			}, waitFor, 10*time.Millisecond)

			assert.Equal(t, bad.Data, dead.Data)
			assert.Equal(t, tt.errorText, dead.Header.Get("Agents-Error"))
			assert.Equal(t, bad.Subject, dead.Header.Get("Agents-Original-Subject"))
			assert.Equal(t, bus.StreamEvents, dead.Header.Get("Agents-Original-Stream"))
			assert.Equal(t, "1", dead.Header.Get("Agents-Original-Sequence"))
			assert.Equal(t, "bad-1", dead.Header.Get("Agents-Original-Msg-Id"))
			assert.Equal(t, "dlq-test", dead.Header.Get("Agents-Consumer"))
			assert.Equal(t, strconv.Itoa(tt.attempts), dead.Header.Get("Agents-Deliveries"))
			assert.Equal(t, "bad", dead.Header.Get("Agents-Type"))
			assert.Equal(t, traceparent, dead.Header.Get("traceparent"))
			assert.Equal(t, "dlq-test:AGENTS_EVENTS:1", dead.Header.Get("Nats-Msg-Id"))

			// The runner goes on with the next message.
			good := nats.NewMsg(bus.EventSubject("session", "s1", "good"))
			good.Header.Set("Nats-Msg-Id", "good-1")
			good.Data = []byte("good")
			_, err = js.PublishMsg(ctx, good)
			require.NoError(t, err)
			require.Eventually(t, func() bool { return attempts.get("good-1") == 1 }, waitFor, 10*time.Millisecond)
			require.Eventually(t, settled(t, js, bus.StreamEvents, "dlq-test"), waitFor, 10*time.Millisecond)
			assert.Equal(t, tt.attempts, attempts.get("bad-1"))
			assert.EqualValues(t, 1, streamMsgs(t, js, bus.StreamDLQ))
		})
	}
}

func TestRunDeadLettersMessageWhoseHandlerNeverReturned(t *testing.T) {
	t.Parallel()
	_, js, _ := bustest.Server(t)
	ctx := context.Background()
	var called atomic.Int64
	cfg := runnerConfig(t, "crashy", func(context.Context, jetstream.Msg) error {
		called.Add(1)
		return nil
	})
	cfg.MaxDeliver = 2
	cfg.AckWait = 200 * time.Millisecond

	// A process that died on the message twice: delivered, never settled.
	cons, err := js.CreateOrUpdateConsumer(ctx, bus.StreamEvents, jetstream.ConsumerConfig{
		Durable: "crashy", Description: "created by bus.Run", FilterSubject: "agents.evt.>",
		DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: cfg.AckWait, MaxDeliver: cfg.MaxDeliver + 1, MaxAckPending: 1000,
	})
	require.NoError(t, err)
	publishEvents(t, js, "crash", 1, 1)
	for range 2 {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(waitFor))
		require.NoError(t, err)
		n := 0
		for range batch.Messages() {
			n++
		}
		require.Equal(t, 1, n)
	}

	start(t, js, cfg)
	dlq, err := js.Stream(ctx, bus.StreamDLQ)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := dlq.GetLastMsgForSubject(ctx, "agents.dlq.crashy")
		return err == nil
	}, waitFor, 10*time.Millisecond)
	require.Eventually(t, settled(t, js, bus.StreamEvents, "crashy"), waitFor, 10*time.Millisecond)
	assert.Zero(t, called.Load(), "the handler is not tried beyond MaxDeliver")
}
