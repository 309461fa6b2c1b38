package relay_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/relay"
)

// benchSessions is how many sessions the throughput benchmarks spread
// their events over.
const benchSessions = 100

// eventMsg is a message shaped like the relay's: same subject, headers and
// body size.
func eventMsg(session string, n int) *nats.Msg {
	entry := fmt.Sprintf("1700000000000-%d", n)
	m := nats.NewMsg(bus.SidecarEventSubject(session, "usage_update"))
	m.Header.Set(jetstream.MsgIDHeader, relay.MsgID(session, entry))
	m.Header.Set(bus.HeaderType, "usage_update")
	m.Header.Set(relay.HeaderRedisEntry, entry)
	m.Data = fmt.Appendf(nil, `{"sessionId":%q,"entryId":%q,"type":"usage_update","ts":1700000000000,"data":{"n":%d}}`, session, entry, n)
	return m
}

// waitStored waits until AGENTS_SIDECAR_EVENTS holds want messages.
func waitStored(b *testing.B, js jetstream.JetStream, want uint64) {
	ctx := context.Background()
	s, err := js.Stream(ctx, bus.StreamSidecarEvents)
	require.NoError(b, err)
	for {
		info, err := s.Info(ctx)
		require.NoError(b, err)
		if info.State.Msgs >= want {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func reportRate(b *testing.B, start time.Time) float64 {
	rate := float64(b.N) / time.Since(start).Seconds()
	b.ReportMetric(rate, "events/s")
	b.ReportMetric(0, "ns/op")
	return rate
}

// BenchmarkThroughput compares the relay with its baselines, all against
// the same kind of servers (JetStream fsyncing before every ack, real
// Redis): JetStream async publish, JetStream atomic batch publish, and Redis
// XADD then XREADGROUP. Run with e.g. -benchtime=100000x.
func BenchmarkThroughput(b *testing.B) {
	rates := map[string]float64{}
	var mu sync.Mutex
	record := func(name string, rate float64) {
		mu.Lock()
		rates[name] = rate
		mu.Unlock()
	}
	b.Run("jetstream_async", func(b *testing.B) {
		e, ids := newEnv(b), newSessions(benchSessions)
		js, err := jetstream.New(bustestConn(b, e), jetstream.WithPublishAsyncMaxPending(256))
		require.NoError(b, err)
		b.ResetTimer()
		start := time.Now()
		for i := range b.N {
			_, err := js.PublishMsgAsync(eventMsg(ids[i%benchSessions], i), jetstream.WithStallWait(time.Minute))
			require.NoError(b, err)
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(5 * time.Minute):
			b.Fatal("async publishes not acknowledged")
		}
		record("jetstream_async", reportRate(b, start))
	})

	b.Run("jetstream_atomic_batch", func(b *testing.B) {
		e, ids := newEnv(b), newSessions(benchSessions)
		pub, err := bus.NewPublisher(e.js, bus.PublisherConfig{MaxBatch: 1000, MaxConcurrentBatches: 1})
		require.NoError(b, err)
		msgs := make([]*nats.Msg, b.N)
		for i := range msgs {
			msgs[i] = eventMsg(ids[i%benchSessions], i)
		}
		b.ResetTimer()
		start := time.Now()
		require.NoError(b, pub.PublishMsgs(context.Background(), msgs))
		record("jetstream_atomic_batch", reportRate(b, start))
	})

	b.Run("redis_xadd_xreadgroup", func(b *testing.B) {
		e, ids := newEnv(b), newSessions(benchSessions)
		ctx := context.Background()
		for _, id := range ids {
			require.NoError(b, e.rdb.XGroupCreateMkStream(ctx, relay.EventsKey(id), "bench", "0").Err())
		}
		b.ResetTimer()
		start := time.Now()
		writeBench(b, e.rdb, ids, 0, b.N)
		streams := make([]string, 0, 2*benchSessions)
		for _, id := range ids {
			streams = append(streams, relay.EventsKey(id))
		}
		for range ids {
			streams = append(streams, ">")
		}
		for read := 0; read < b.N; {
			res, err := e.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "bench", Consumer: "c", Streams: streams, Count: 10, Block: -1}).Result()
			require.NoError(b, err)
			for _, s := range res {
				read += len(s.Messages)
			}
		}
		record("redis_xadd_xreadgroup", reportRate(b, start))
	})

	b.Run("relay", func(b *testing.B) {
		e, ids := newEnv(b), newSessions(benchSessions)
		e.activate(ids...)
		writeBench(b, e.rdb, ids, 0, b.N)
		b.ResetTimer()
		start := time.Now()
		p := e.start("relay-bench", func(c *relay.Config) { c.Logger = slog.New(slog.DiscardHandler); c.LeaseTTL = 10 * time.Second })
		waitStored(b, e.js, uint64(b.N))
		record("relay", reportRate(b, start))
		b.StopTimer()
		p.stop()
	})

	if rates["relay"] > 0 && rates["jetstream_atomic_batch"] > 0 {
		b.Logf("relay / atomic batch publish = %.2f; relay / async publish = %.2f",
			rates["relay"]/rates["jetstream_atomic_batch"], rates["relay"]/rates["jetstream_async"])
	}
}

// BenchmarkRelayVsBatch measures the relay and the atomic batch publish
// baseline in alternating rounds, so both see the same machine load, and
// reports their ratio. The relay's time runs from the first XADD of a round
// to its last event stored. Run with e.g. -benchtime=100000x.
func BenchmarkRelayVsBatch(b *testing.B) {
	const rounds = 5
	base, rel := newEnv(b), newEnv(b)
	pub, err := bus.NewPublisher(base.js, bus.PublisherConfig{MaxBatch: 1000, MaxConcurrentBatches: 1})
	require.NoError(b, err)
	baseIDs, relIDs := newSessions(benchSessions), newSessions(benchSessions)
	rel.activate(relIDs...)
	p := rel.start("relay-bench", func(c *relay.Config) { c.Logger = slog.New(slog.DiscardHandler); c.LeaseTTL = 10 * time.Second })
	require.Eventually(b, func() bool { return len(p.relay.Held()) == benchSessions && p.relay.Ready() }, wait, 10*time.Millisecond)
	per := max(b.N/rounds, 1)
	var tBatch, tRelay time.Duration
	b.ResetTimer()
	for r := range rounds {
		msgs := make([]*nats.Msg, per)
		for i := range msgs {
			msgs[i] = eventMsg(baseIDs[i%benchSessions], r*per+i)
		}
		start := time.Now()
		require.NoError(b, pub.PublishMsgs(context.Background(), msgs))
		tBatch += time.Since(start)

		start = time.Now()
		writeBench(b, rel.rdb, relIDs, r*per, (r+1)*per)
		waitStored(b, rel.js, uint64((r+1)*per))
		tRelay += time.Since(start)
	}
	b.StopTimer()
	batchRate := float64(rounds*per) / tBatch.Seconds()
	relayRate := float64(rounds*per) / tRelay.Seconds()
	b.ReportMetric(batchRate, "batch-events/s")
	b.ReportMetric(relayRate, "relay-events/s")
	b.ReportMetric(relayRate/batchRate, "relay/batch")
	b.ReportMetric(0, "ns/op")
}

// writeBench writes events from..to-1 round-robin over the sessions, in
// pipelines of 1000.
func writeBench(b *testing.B, rdb *redis.Client, ids []string, from, to int) {
	ctx := context.Background()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for lo := from; lo < to; lo += 1000 {
		hi := min(lo+1000, to)
		g.Go(func() error {
			_, err := rdb.Pipelined(gctx, func(p redis.Pipeliner) error {
				for n := lo; n < hi; n++ {
					p.XAdd(gctx, &redis.XAddArgs{Stream: relay.EventsKey(ids[n%len(ids)]), Values: []any{
						"type", "usage_update", "data", `{"n":` + strconv.Itoa(n) + `}`, "ts", "1700000000000",
					}})
				}
				return nil
			})
			return err
		})
	}
	require.NoError(b, g.Wait())
}

func bustestConn(b *testing.B, e *env) *nats.Conn {
	nc, err := nats.Connect(e.srv.ClientURL())
	require.NoError(b, err)
	b.Cleanup(nc.Close)
	return nc
}

// BenchmarkLatency measures the time from a sidecar's XADD to a JetStream
// consumer receiving the event through the relay, at a steady rate: 1,000
// events/s over 10 sessions, and 5,000 events/s over 100 sessions (50 each,
// the live feed's load). Beside the relay, in the same run and at the same
// rate, it measures the two hops alone:
//
//   - redis_xadd_to_xreadgroup: XADD to a blocked XREADGROUP over the same
//     streams;
//   - jetstream_publish_to_consumer: the events published as they come to
//     the same kind of consumer, by one publisher that sends whatever waits
//     once the previous publish is stored: one event on its own, more as
//     one atomic batch. With JetStream fsyncing every message before its
//     ack, that is about the least latency the rate allows; the relay adds
//     its own work to it.
//
// Each reports p50, p99 and max in µs. Run with e.g. -benchtime=5000x.
func BenchmarkLatency(b *testing.B) {
	for _, load := range []struct{ sessions, rate int }{{10, 1000}, {100, 5000}} {
		b.Run(fmt.Sprintf("rate=%d", load.rate), func(b *testing.B) { benchLatency(b, load.sessions, load.rate) })
	}
}

func benchLatency(b *testing.B, sessions, rate int) {
	b.Run("redis_xadd_to_xreadgroup", func(b *testing.B) {
		e, ids := newEnv(b), newSessions(sessions)
		ctx := context.Background()
		streams := make([]string, 2*len(ids))
		for i, id := range ids {
			streams[i], streams[len(ids)+i] = relay.EventsKey(id), ">"
			require.NoError(b, e.rdb.XGroupCreateMkStream(ctx, relay.EventsKey(id), "bench", "$").Err())
		}
		sent := make(stamps, b.N)
		lat := make([]time.Duration, 0, b.N)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for got := 0; got < b.N; {
				res, err := e.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "bench", Consumer: "c", Streams: streams, Count: 1000, Block: time.Second}).Result()
				if err != nil {
					continue
				}
				now := time.Now()
				for _, s := range res {
					for _, m := range s.Messages {
						n, _ := strconv.Atoi(m.Values["n"].(string))
						lat = append(lat, sent.since(n, now))
						got++
					}
				}
			}
		}()
		writer := testenvClient(b, e)
		b.ResetTimer()
		pace(b.N, rate, func(i int) {
			sent.set(i)
			require.NoError(b, writer.XAdd(ctx, &redis.XAddArgs{Stream: relay.EventsKey(ids[i%len(ids)]), Values: []any{"n", i}}).Err())
		})
		<-done
		reportLatency(b, lat)
	})

	b.Run("jetstream_publish_to_consumer", func(b *testing.B) {
		e, ids := newEnv(b), newSessions(sessions)
		ctx := context.Background()
		sent := make(stamps, b.N)
		lat, stop := consumeLatency(b, e, sent)
		defer stop()
		pub, err := bus.NewPublisher(e.js, bus.PublisherConfig{MinBatch: 2, Logger: slog.New(slog.DiscardHandler)})
		require.NoError(b, err)
		var mu sync.Mutex
		var queue []*nats.Msg
		more := make(chan struct{}, 1)
		published := make(chan error, 1)
		go func() {
			for left := b.N; left > 0; {
				<-more
				mu.Lock()
				msgs := queue
				queue = nil
				mu.Unlock()
				if err := pub.PublishMsgs(ctx, msgs); err != nil {
					published <- err
					return
				}
				left -= len(msgs)
			}
			published <- nil
		}()
		b.ResetTimer()
		pace(b.N, rate, func(i int) {
			m := eventMsg(ids[i%len(ids)], i)
			m.Data = fmt.Appendf(nil, `{"data":{"n":%d}}`, i)
			mu.Lock()
			sent.set(i)
			queue = append(queue, m)
			mu.Unlock()
			select {
			case more <- struct{}{}:
			default:
			}
		})
		require.NoError(b, <-published)
		reportLatency(b, lat())
	})

	b.Run("relay", func(b *testing.B) {
		e, ids := newEnv(b), newSessions(sessions)
		ctx := context.Background()
		e.activate(ids...)
		p := e.start("relay-bench", func(c *relay.Config) { c.Logger = slog.New(slog.DiscardHandler); c.LeaseTTL = 10 * time.Second })
		require.Eventually(b, func() bool { return len(p.relay.Held()) == len(ids) && p.relay.Ready() }, wait, 10*time.Millisecond)
		sent := make(stamps, b.N)
		lat, stop := consumeLatency(b, e, sent)
		defer stop()
		writer := testenvClient(b, e)
		b.ResetTimer()
		pace(b.N, rate, func(i int) {
			sent.set(i)
			require.NoError(b, writer.XAdd(ctx, &redis.XAddArgs{Stream: relay.EventsKey(ids[i%len(ids)]), Values: []any{
				"type", "usage_update", "data", `{"n":` + strconv.Itoa(i) + `}`, "ts", "1700000000000",
			}}).Err())
		})
		reportLatency(b, lat())
	})
}

// stamps holds when each event was sent, written by the writer and read by
// the consumer.
type stamps []atomic.Int64

func (s stamps) set(i int) { s[i].Store(time.Now().UnixNano()) }

func (s stamps) since(i int, now time.Time) time.Duration {
	return now.Sub(time.Unix(0, s[i].Load()))
}

// pace calls send(i) for i from 0 to n-1 at rate calls a second, catching
// up at once when it falls behind.
func pace(n, rate int, send func(i int)) {
	start := time.Now()
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))); d > 0 {
			time.Sleep(d)
		}
		send(i)
	}
}

func testenvClient(b *testing.B, e *env) *redis.Client {
	opts, err := redis.ParseURL(e.redisURL)
	require.NoError(b, err)
	c := redis.NewClient(opts)
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// consumeLatency receives events on AGENTS_SIDECAR_EVENTS with an ordered
// push-style consumer and records, for event n, the time since sent[n].
func consumeLatency(b *testing.B, e *env, sent stamps) (collect func() []time.Duration, stop func()) {
	ctx := context.Background()
	s, err := e.js.Stream(ctx, bus.StreamSidecarEvents)
	require.NoError(b, err)
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy})
	require.NoError(b, err)
	var mu sync.Mutex
	lat := make([]time.Duration, 0, len(sent))
	all := make(chan struct{})
	cc, err := cons.Consume(func(m jetstream.Msg) {
		now := time.Now()
		var n int
		if _, err := fmt.Sscanf(string(m.Data()[indexData(m.Data()):]), `{"n":%d}`, &n); err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		lat = append(lat, sent.since(n, now))
		if len(lat) == len(sent) {
			close(all)
		}
	})
	require.NoError(b, err)
	return func() []time.Duration {
		select {
		case <-all:
		case <-time.After(wait):
			b.Fatal("not every event arrived")
		}
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(lat)
	}, cc.Stop
}

func indexData(body []byte) int {
	const key = `"data":`
	for i := 0; i+len(key) <= len(body); i++ {
		if string(body[i:i+len(key)]) == key {
			return i + len(key)
		}
	}
	return 0
}

func reportLatency(b *testing.B, lat []time.Duration) {
	b.StopTimer()
	slices.Sort(lat)
	p := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(p(0.50), "p50-µs")
	b.ReportMetric(p(0.99), "p99-µs")
	b.ReportMetric(p(1), "max-µs")
	b.ReportMetric(0, "ns/op")
}
