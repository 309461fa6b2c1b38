package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentbus/agentbus/postgres/queries"
)

var (
	outboxBacklog = prometheus.NewDesc("agentbus_outbox_backlog_events",
		"Events committed to the outbox and not yet on JetStream.", nil, nil)
	outboxAge = prometheus.NewDesc("agentbus_outbox_oldest_event_age_seconds",
		"Age of the oldest event waiting in the outbox (0 when none waits).", nil, nil)
	poolSlotsUsed = prometheus.NewDesc("agentbus_pool_slots_used",
		"Pool slots held by the owner's sessions (owners holding at least one).", []string{"owner_id"}, nil)
	poolSlots = prometheus.NewDesc("agentbus_pool_slots",
		"Size of the owner's session pool (owners holding at least one slot).", []string{"owner_id"}, nil)
	poolUtilization = prometheus.NewDesc("agentbus_pool_utilization_ratio",
		"Share of the owner's session pool in use (owners holding at least one slot).", []string{"owner_id"}, nil)
)

// Store collects, at each scrape, the outbox backlog and the pool slots in
// use, read from Postgres.
type Store struct {
	Queries *queries.Store
}

// Describe implements prometheus.Collector.
func (c Store) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{outboxBacklog, outboxAge, poolSlotsUsed, poolSlots, poolUtilization} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c Store) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := scrapeContext()
	defer cancel()
	n, age, err := c.Queries.OutboxBacklog(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(outboxBacklog, err)
	} else {
		ch <- prometheus.MustNewConstMetric(outboxBacklog, prometheus.GaugeValue, float64(n))
		ch <- prometheus.MustNewConstMetric(outboxAge, prometheus.GaugeValue, age.Seconds())
	}
	slots, err := c.Queries.PoolSlotsInUse(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(poolSlotsUsed, err)
		return
	}
	for owner, s := range slots {
		id := owner.String()
		ch <- prometheus.MustNewConstMetric(poolSlotsUsed, prometheus.GaugeValue, float64(s[0]), id)
		ch <- prometheus.MustNewConstMetric(poolSlots, prometheus.GaugeValue, float64(s[1]), id)
		if s[1] > 0 {
			ch <- prometheus.MustNewConstMetric(poolUtilization, prometheus.GaugeValue, float64(s[0])/float64(s[1]), id)
		}
	}
}
