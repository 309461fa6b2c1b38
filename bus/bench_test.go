package bus_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
)

var benchRun atomic.Int64

// benchMsgs builds n event envelopes on subjects of their own, so a
// consumer can select exactly them.
func benchMsgs(b *testing.B, n int) (msgs []*nats.Msg, filter string) {
	b.Helper()
	run := benchRun.Add(1)
	filter = fmt.Sprintf("agents.evt.bench%d.>", run)
	msgs = make([]*nats.Msg, n)
	for i := range msgs {
		env := envelope(b, fmt.Sprintf("bench%d-%d", run, i))
		env.Data = []byte(`{"text":"a line of agent output, about the size of a small event"}`)
		m, err := bus.NewMsg(context.Background(), fmt.Sprintf("agents.evt.bench%d.s%d.message_enqueued", run, i%10), env)
		require.NoError(b, err)
		msgs[i] = m
	}
	return msgs, filter
}

// BenchmarkPublish compares publishing with an fsync per message (sync:
// one publish at a time; async: many in flight; fast-N: the server's
// non-atomic fast batches of N) against atomic batches (one fsync per
// batch, batch-N), runs of N sent as the publisher chooses (runs-N), and
// the runner's throughput against the raw publish rate. x-sync is each case's rate over the rate of sync publishing,
// measured in the same run on the same server.
//
//	go test -run '^$' -bench BenchmarkPublish ./bus/
func BenchmarkPublish(b *testing.B) {
	_, js, _ := bustest.Server(b)
	ctx := context.Background()

	syncRate := func() float64 {
		msgs, _ := benchMsgs(b, 300)
		start := time.Now()
		for _, m := range msgs {
			_, err := js.PublishMsg(ctx, m)
			require.NoError(b, err)
		}
		return float64(len(msgs)) / time.Since(start).Seconds()
	}()

	report := func(b *testing.B, n int, elapsed time.Duration) {
		rate := float64(n) / elapsed.Seconds()
		b.ReportMetric(rate, "msgs/s")
		b.ReportMetric(rate/syncRate, "x-sync")
	}

	b.Run("sync", func(b *testing.B) {
		msgs, _ := benchMsgs(b, b.N)
		b.ResetTimer()
		start := time.Now()
		for _, m := range msgs {
			if _, err := js.PublishMsg(ctx, m); err != nil {
				b.Fatal(err)
			}
		}
		report(b, b.N, time.Since(start))
	})

	b.Run("async", func(b *testing.B) {
		pub, err := bus.NewPublisher(js, bus.PublisherConfig{DisableBatch: true})
		require.NoError(b, err)
		msgs, _ := benchMsgs(b, b.N)
		b.ResetTimer()
		start := time.Now()
		if err := pub.PublishMsgs(ctx, msgs); err != nil {
			b.Fatal(err)
		}
		report(b, b.N, time.Since(start))
	})

	for _, size := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("batch-%d", size), func(b *testing.B) {
			pub, err := bus.NewPublisher(js, bus.PublisherConfig{MaxBatch: size, MinBatch: size})
			require.NoError(b, err)
			msgs, _ := benchMsgs(b, b.N)
			b.ResetTimer()
			start := time.Now()
			if err := pub.PublishMsgs(ctx, msgs); err != nil {
				b.Fatal(err)
			}
			report(b, b.N, time.Since(start))
		})
	}

	// runs-N: messages published in runs of N, as a caller publishing what
	// came in together does; min-batch-2 sends every run of two or more as an
	// atomic batch, measured chooses per run (MeasureBatch).
	for _, size := range []int{4, 16, 64} {
		for _, cfg := range []struct {
			name string
			cfg  bus.PublisherConfig
		}{
			{"min-batch-2", bus.PublisherConfig{MinBatch: 2}},
			{"measured", bus.PublisherConfig{MeasureBatch: true}},
		} {
			b.Run(fmt.Sprintf("runs-%d/%s", size, cfg.name), func(b *testing.B) {
				pub, err := bus.NewPublisher(js, cfg.cfg)
				require.NoError(b, err)
				msgs, _ := benchMsgs(b, b.N)
				b.ResetTimer()
				start := time.Now()
				for lo := 0; lo < len(msgs); lo += size {
					if err := pub.PublishMsgs(ctx, msgs[lo:min(lo+size, len(msgs))]); err != nil {
						b.Fatal(err)
					}
				}
				report(b, b.N, time.Since(start))
			})
		}
	}

	// fast-N: nats-server's non-atomic fast batch (allow_batched), N
	// messages a batch. On a single node the server stores each message of
	// it as a single publish, fsync included, and only acks less often; so
	// it runs at about the async rate, not the atomic batch's.
	stream, err := js.Stream(ctx, bus.StreamEvents)
	require.NoError(b, err)
	cfg := stream.CachedInfo().Config
	cfg.AllowBatchPublish = true
	_, err = js.UpdateStream(ctx, cfg)
	require.NoError(b, err)
	for _, size := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("fast-%d", size), func(b *testing.B) {
			msgs, _ := benchMsgs(b, b.N)
			b.ResetTimer()
			start := time.Now()
			for lo := 0; lo < len(msgs); lo += size {
				run := msgs[lo:min(lo+size, len(msgs))]
				fp, err := jetstreamext.NewFastPublisher(js, jetstreamext.FastPublishFlowControl{Flow: uint16(min(size, 500))})
				if err != nil {
					b.Fatal(err)
				}
				for _, m := range run[:len(run)-1] {
					if _, err := fp.AddMsg(m); err != nil {
						b.Fatal(err)
					}
				}
				ack, err := fp.CommitMsg(ctx, run[len(run)-1])
				if err != nil {
					b.Fatal(err)
				}
				if ack.BatchSize != uint64(len(run)) {
					b.Fatalf("fast batch stored %d of %d", ack.BatchSize, len(run))
				}
			}
			report(b, b.N, time.Since(start))
		})
	}

	// runner: publish b.N messages in batches of 1000, then handle them
	// with a runner (4 handlers, no-op); x-publish is handled/s over
	// published/s.
	b.Run("runner", func(b *testing.B) {
		pub, err := bus.NewPublisher(js, bus.PublisherConfig{})
		require.NoError(b, err)
		msgs, filter := benchMsgs(b, b.N)
		b.ResetTimer()
		start := time.Now()
		if err := pub.PublishMsgs(ctx, msgs); err != nil {
			b.Fatal(err)
		}
		published := time.Since(start)

		var handled atomic.Int64
		done := make(chan struct{})
		runCtx, cancel := context.WithCancel(ctx)
		start = time.Now()
		go func() {
			defer close(done)
			err := bus.Run(runCtx, js, bus.RunnerConfig{
				Stream:         bus.StreamEvents,
				Consumer:       fmt.Sprintf("bench%d", benchRun.Add(1)),
				FilterSubjects: []string{filter},
				Concurrency:    4,
				BatchSize:      256,
				Logger:         testLogger(b),
				Handler: func(context.Context, jetstream.Msg) error {
					handled.Add(1)
					return nil
				},
			})
			if err != nil {
				b.Error(err)
			}
		}()
		for handled.Load() < int64(b.N) {
			time.Sleep(time.Millisecond)
		}
		consumed := time.Since(start)
		b.StopTimer()
		cancel()
		<-done

		pubRate := float64(b.N) / published.Seconds()
		runRate := float64(b.N) / consumed.Seconds()
		b.ReportMetric(pubRate, "published/s")
		b.ReportMetric(runRate, "handled/s")
		b.ReportMetric(runRate/pubRate, "x-publish")
	})
}
