package webhooks_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/handlers/webhooks"
	"github.com/agentbus/agentbus/internal/webhooktest"
)

// BenchmarkWebhookDelivery publishes b.N session events (over 8 sessions)
// and measures, in the same run, two readers of them: the webhooks worker
// posting each to a receiver on loopback, and a bare JetStream ordered
// consumer. It reports deliveries per second and the p50/p99 from an
// event's publish acknowledgement (it is stored) to its arrival, for
// both, and their ratios.
func BenchmarkWebhookDelivery(b *testing.B) {
	f := newFixture(b)
	f.run(b, webhooks.Config{AllowPrivate: true, PollInterval: 50 * time.Millisecond})
	rcv := webhooktest.New(b, nil)
	f.webhook(b, rcv.URL)
	sessions := make([]uuid.UUID, 8)
	for i := range sessions {
		sessions[i] = f.session(b)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bare, err := f.js.OrderedConsumer(ctx, bus.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{webhooks.FilterSubject}, DeliverPolicy: jetstream.DeliverNewPolicy})
	require.NoError(b, err)
	bareAt := make(chan map[string]time.Time, 1)
	go func() {
		got := map[string]time.Time{}
		it, err := bare.Messages()
		if err != nil {
			bareAt <- got
			return
		}
		defer it.Stop()
		for len(got) < b.N {
			m, err := it.Next()
			if err != nil {
				break
			}
			env, err := bus.DecodeEnvelope(m.Data())
			if err == nil {
				got[env.ID] = time.Now()
			}
		}
		bareAt <- got
	}()

	stored := make(map[string]time.Time, b.N)
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		id := f.event(b, sessions[i%len(sessions)], waiting)
		stored[id] = time.Now()
	}
	deadline := time.Now().Add(5 * time.Minute)
	for len(rcv.Accepted()) < b.N && time.Now().Before(deadline) {
		select {
		case <-rcv.Arrived():
		case <-time.After(100 * time.Millisecond):
		}
	}
	b.StopTimer()
	accepted := rcv.Accepted()
	require.Len(b, accepted, b.N, "every event delivered")
	bareGot := <-bareAt
	require.Len(b, bareGot, b.N, "every event consumed")

	var hookLat, bareLat []time.Duration
	var hookLast, bareLast time.Time
	for _, g := range accepted {
		hookLat = append(hookLat, g.At.Sub(stored[g.ID()]))
		hookLast = later(hookLast, g.At)
	}
	for id, at := range bareGot {
		bareLat = append(bareLat, at.Sub(stored[id]))
		bareLast = later(bareLast, at)
	}
	hookRate := float64(b.N) / hookLast.Sub(start).Seconds()
	bareRate := float64(b.N) / bareLast.Sub(start).Seconds()
	b.ReportMetric(hookRate, "deliveries/s")
	b.ReportMetric(bareRate, "js-consumed/s")
	b.ReportMetric(ms(pct(hookLat, 50)), "p50-ms")
	b.ReportMetric(ms(pct(hookLat, 99)), "p99-ms")
	b.ReportMetric(ms(pct(bareLat, 50)), "js-p50-ms")
	b.ReportMetric(ms(pct(bareLat, 99)), "js-p99-ms")
	b.ReportMetric(ms(pct(hookLat, 99)-pct(bareLat, 99)), "added-p99-ms")
	b.ReportMetric(bareRate/hookRate, "js/webhook-rate")
	b.ReportMetric(float64(pct(hookLat, 99))/float64(pct(bareLat, 99)), "webhook/js-p99")
	b.ReportMetric(0, "ns/op")
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
