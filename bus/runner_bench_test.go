package bus_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
)

// BenchmarkRunnerHandOff measures how long a message takes from its
// publish to the start of its handler: the runner unordered (workers
// taking from the subscription), ordered (keyed lanes) and ordered with
// batches, each beside a bare jetstream Consume callback on a consumer
// of its own, on a connection of its own, in the same run: the two take
// turns, one message at a time, so every message finds its consumer
// idle and waiting, as a steering message does. x-bare is the runner's p50 (p99) over the bare callback's.
//
//	go test -run '^$' -bench BenchmarkRunnerHandOff -benchtime=2000x ./bus/
func BenchmarkRunnerHandOff(b *testing.B) {
	srv, _, nc := bustest.Server(b)

	type mode struct {
		name  string
		apply func(*bus.RunnerConfig, chan<- time.Duration)
	}
	handler := func(started chan<- time.Duration) bus.Handler {
		return func(_ context.Context, m jetstream.Msg) error {
			started <- sinceSent(m.Data())
			return nil
		}
	}
	modes := []mode{
		{"unordered", func(c *bus.RunnerConfig, started chan<- time.Duration) {
			c.Handler = handler(started)
		}},
		{"ordered", func(c *bus.RunnerConfig, started chan<- time.Duration) {
			c.Handler = handler(started)
			c.OrderKey = bus.BySubject
		}},
		{"ordered-batch", func(c *bus.RunnerConfig, started chan<- time.Duration) {
			c.BatchHandler = func(_ context.Context, batch []bus.Delivery) []error {
				for _, d := range batch {
					started <- sinceSent(d.Msg.Data())
				}
				return make([]error, len(batch))
			}
			c.OrderKey = bus.BySubject
			c.LaneBuffer = 8
		}},
	}
	for i, md := range modes {
		b.Run(md.name, func(b *testing.B) {
			subject := fmt.Sprintf("agents.evt.handoff%d", i)
			started := make(chan time.Duration, 1)
			cfg := bus.RunnerConfig{
				Stream: bus.StreamEvents, Consumer: fmt.Sprintf("handoff-%d", i),
				FilterSubjects: []string{subject + ".runner.*"},
				Concurrency:    4, Logger: testLogger(b),
			}
			md.apply(&cfg, started)
			_, runnerJS := bustest.Connect(b, srv)
			start(b, runnerJS, cfg)

			bare := make(chan time.Duration, 1)
			_, bareJS := bustest.Connect(b, srv)
			cons, err := bareJS.CreateOrUpdateConsumer(context.Background(), bus.StreamEvents, jetstream.ConsumerConfig{
				Durable: fmt.Sprintf("handoff-bare-%d", i), AckPolicy: jetstream.AckExplicitPolicy,
				FilterSubject: subject + ".bare.*",
			})
			require.NoError(b, err)
			cc, err := cons.Consume(func(m jetstream.Msg) {
				bare <- sinceSent(m.Data())
				_ = m.Ack()
			}, jetstream.PullMaxMessages(16))
			require.NoError(b, err)
			b.Cleanup(cc.Stop)

			// Both are warmed up first.
			runnerTimes := make([]time.Duration, 0, b.N)
			bareTimes := make([]time.Duration, 0, b.N)
			send := func(n int) {
				for j := range n {
					var got [2]time.Duration
					for k, to := range []struct {
						kind string
						seen chan time.Duration
					}{{"runner", started}, {"bare", bare}} {
						data := binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixNano()))
						if err := nc.Publish(fmt.Sprintf("%s.%s.s%d", subject, to.kind, j%10), data); err != nil {
							b.Fatal(err)
						}
						select {
						case got[k] = <-to.seen:
						case <-time.After(waitFor):
							b.Fatalf("message %d not handled by the %s", j, to.kind)
						}
						// Idle again, as between two steering messages.
						time.Sleep(200 * time.Microsecond)
					}
					if n == b.N {
						runnerTimes = append(runnerTimes, got[0])
						bareTimes = append(bareTimes, got[1])
					}
				}
			}
			send(50)
			b.ResetTimer()
			send(b.N)
			b.StopTimer()
			r50, r99 := percentiles(runnerTimes)
			b50, b99 := percentiles(bareTimes)
			b.ReportMetric(float64(r50.Microseconds()), "p50-µs")
			b.ReportMetric(float64(r99.Microseconds()), "p99-µs")
			b.ReportMetric(float64(b50.Microseconds()), "bare-p50-µs")
			b.ReportMetric(float64(b99.Microseconds()), "bare-p99-µs")
			b.ReportMetric(float64(r50)/float64(max(b50, 1)), "x-bare-p50")
			b.ReportMetric(float64(r99)/float64(max(b99, 1)), "x-bare-p99")
		})
	}
}

// sinceSent is how long ago the message stamped with its send time in
// its first 8 bytes was sent.
func sinceSent(data []byte) time.Duration {
	return time.Since(time.Unix(0, int64(binary.BigEndian.Uint64(data))))
}

func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[min(len(s)-1, len(s)*99/100)]
}
