package webhooks

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/postgres/queries"
)

// metrics are the worker's Prometheus series; a nil *metrics measures
// nothing.
type metrics struct {
	attempts *prometheus.CounterVec
	latency  prometheus.Histogram
	stored   prometheus.Histogram
	outcomes *prometheus.CounterVec
	disables prometheus.Counter
}

// The outcomes of agentbus_webhook_deliveries_total.
const (
	outcomeDelivered = "delivered"
	outcomeError     = "error"
	outcomeFailed    = "failed"
)

var queueAge = prometheus.NewDesc("agentbus_webhook_queue_age_seconds",
	"Age of the webhook's oldest delivery not yet delivered.", []string{"webhook_id"}, nil)

func newMetrics(reg prometheus.Registerer, db *pgxpool.Pool) *metrics {
	if reg == nil {
		return nil
	}
	m := &metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbus_webhook_attempts_total",
			Help: "Attempts to post a delivery, by outcome: delivered (2xx) or error (any other answer, a refused destination, a network error or a timeout)."},
			[]string{"outcome"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbus_webhook_deliveries_total",
			Help: "Deliveries that ended, by outcome: delivered or failed (after the last retry)."},
			[]string{"outcome"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "agentbus_webhook_attempt_duration_seconds",
			Help: "Time from sending a delivery to the receiver's answer.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}),
		stored: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "agentbus_webhook_delivery_delay_seconds",
			Help: "Time from a delivery's enqueueing to its successful attempt's answer.", Buckets: prometheus.ExponentialBuckets(0.005, 4, 12)}),
		disables: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentbus_webhooks_disabled_total",
			Help: "Webhooks disabled because their deliveries failed too many times in a row."}),
	}
	m.disables = register(reg, m.disables)
	m.attempts = register(reg, m.attempts)
	m.outcomes = register(reg, m.outcomes)
	m.latency = register(reg, m.latency)
	m.stored = register(reg, m.stored)
	_ = reg.Register(queueAges{db: db})
	return m
}

// register registers c, or returns the collector registered already (a
// worker started again in the same process).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if existing, ok := already.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}

func (m *metrics) attempted(d postgres.ClaimedDelivery, o postgres.AttemptOutcome, delivered bool, now time.Time) {
	if m == nil {
		return
	}
	m.latency.Observe(o.Latency.Seconds())
	if delivered {
		m.attempts.WithLabelValues(outcomeDelivered).Inc()
		m.outcomes.WithLabelValues(outcomeDelivered).Inc()
		m.stored.Observe(now.Sub(d.EnqueuedAt).Seconds())
		return
	}
	m.attempts.WithLabelValues(outcomeError).Inc()
}

func (m *metrics) failed() {
	if m != nil {
		m.outcomes.WithLabelValues(outcomeFailed).Inc()
	}
}

func (m *metrics) disabled() {
	if m != nil {
		m.disables.Inc()
	}
}

// queueAges collects, at each scrape, the age of each webhook's oldest
// pending delivery.
type queueAges struct{ db *pgxpool.Pool }

func (q queueAges) Describe(ch chan<- *prometheus.Desc) { ch <- queueAge }

func (q queueAges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ages, err := queries.WebhookQueueAges(ctx, q.db, time.Now())
	if err != nil {
		ch <- prometheus.NewInvalidMetric(queueAge, err)
		return
	}
	for id, age := range ages {
		ch <- prometheus.MustNewConstMetric(queueAge, prometheus.GaugeValue, age.Seconds(), id.String())
	}
}
