package relay_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/relay"
)

// BenchmarkOutboundLatency measures the time from publishing a sidecar
// command to reading its entry from the session's command stream, one
// command at a time over 10 sessions, as a steering message goes.
// Beside the relay, sample by sample in the same run:
//
//   - redis_xadd_to_xread: an XADD to a stream a client reads;
//   - jetstream_consume_xadd: the command published to a work queue
//     stream of the same kind, taken by a bare jetstream Consume
//     callback that writes it with relay.WriteCommand and acks it: the
//     least a consumer of JetStream writing to Redis can take.
//
// It reports p50 and p99 in µs of each, and x-bare-p50/p99, the relay's
// over the bare consumer's.
//
//	go test -run '^$' -bench BenchmarkOutboundLatency -benchtime=2000x ./relay/
func BenchmarkOutboundLatency(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	nc := bustestConn(b, e)
	reader := testenvClient(b, e)
	writer := testenvClient(b, e)

	// The bare consumer's stream: the relay's, on other subjects.
	_, err := e.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: "BENCH_OUTBOUND", Subjects: []string{"bench.sidecar.*.commands.>"},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Duplicates: 10 * time.Minute,
	})
	require.NoError(b, err)
	cons, err := e.js.CreateOrUpdateConsumer(ctx, "BENCH_OUTBOUND", jetstream.ConsumerConfig{
		Durable: "bare", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 5 * time.Second,
	})
	require.NoError(b, err)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		session := strings.Split(m.Subject(), ".")[2]
		var env bus.Envelope
		if err := json.Unmarshal(m.Data(), &env); err != nil {
			b.Error(err)
			return
		}
		if _, err := relay.WriteCommand(ctx, writer, relay.Command{
			SessionID: session, Type: env.Type, ID: env.ID, Data: env.Data, TS: env.OccurredAt.UnixMilli(),
		}, time.Hour); err != nil {
			b.Error(err)
			return
		}
		_ = m.Ack()
	}, jetstream.PullMaxMessages(16))
	require.NoError(b, err)
	b.Cleanup(cc.Stop)

	e.start("relay-a", nil)

	const sessions = 10
	relayed, bare, plain := newSessions(sessions), newSessions(sessions), newSessions(sessions)
	last := map[string]string{}
	// read waits for the next entry of key and returns when it was read.
	read := func(key string) time.Time {
		from, ok := last[key]
		if !ok {
			from = "0"
		}
		streams, err := reader.XRead(ctx, &redis.XReadArgs{Streams: []string{key, from}, Count: 1, Block: wait}).Result()
		require.NoError(b, err)
		last[key] = streams[0].Messages[0].ID
		return time.Now()
	}
	command := func(subject, session string) *nats.Msg {
		env := bus.Envelope{ID: uuid.NewString(), Type: "steering_message", Aggregate: "session", AggregateID: session,
			OccurredAt: time.Now(), Data: json.RawMessage(`{"message_id":"m1","content":"a steering message","priority":"Immediate"}`)}
		body, err := json.Marshal(env)
		require.NoError(b, err)
		m := nats.NewMsg(subject)
		m.Data = body
		m.Header.Set(jetstream.MsgIDHeader, env.ID)
		return m
	}
	sample := func(i int) (relayLat, bareLat, plainLat time.Duration) {
		s := i % sessions
		m := command(bus.SidecarCommandSubject(relayed[s], "steering_message"), relayed[s])
		sent := time.Now()
		require.NoError(b, nc.PublishMsg(m))
		relayLat = read(relay.CommandsKey(relayed[s])).Sub(sent)

		m = command("bench.sidecar."+bare[s]+".commands.steering_message", bare[s])
		sent = time.Now()
		require.NoError(b, nc.PublishMsg(m))
		bareLat = read(relay.CommandsKey(bare[s])).Sub(sent)

		sent = time.Now()
		require.NoError(b, writer.XAdd(ctx, &redis.XAddArgs{Stream: relay.CommandsKey(plain[s]), Values: []any{"type", "steering_message"}}).Err())
		plainLat = read(relay.CommandsKey(plain[s])).Sub(sent)
		return relayLat, bareLat, plainLat
	}
	for i := range 50 {
		sample(i)
	}
	var relayLat, bareLat, plainLat []time.Duration
	b.ResetTimer()
	for i := range b.N {
		r, j, p := sample(i)
		relayLat, bareLat, plainLat = append(relayLat, r), append(bareLat, j), append(plainLat, p)
		// Idle in between, as between two steering messages.
		time.Sleep(200 * time.Microsecond)
	}
	b.StopTimer()
	pct := func(ds []time.Duration, q float64) time.Duration {
		s := slices.Sorted(slices.Values(ds))
		return s[int(q*float64(len(s)-1))]
	}
	for _, m := range []struct {
		name string
		ds   []time.Duration
	}{{"relay", relayLat}, {"bare", bareLat}, {"xadd-xread", plainLat}} {
		b.ReportMetric(float64(pct(m.ds, 0.5).Microseconds()), m.name+"-p50-µs")
		b.ReportMetric(float64(pct(m.ds, 0.99).Microseconds()), m.name+"-p99-µs")
	}
	b.ReportMetric(float64(pct(relayLat, 0.5))/float64(pct(bareLat, 0.5)), "x-bare-p50")
	b.ReportMetric(float64(pct(relayLat, 0.99))/float64(pct(bareLat, 0.99)), "x-bare-p99")
	b.ReportMetric(0, "ns/op")
}
