package runners

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the placer, measured as it places; register them to expose
// them (metrics.NewRegistry does).
var (
	// PlacementSeconds is the time from a session's start (its pool slot)
	// until its first sidecar is assigned to a runner, waiting included.
	PlacementSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "agentbus_runner_placement_seconds",
		Help:    "Time from a session's start until its sidecar is assigned to a runner, waiting for room included.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
	})
	// RecoverySeconds is the time from a runner's lease lapsing, on the
	// placer's clock, until each of its sessions is assigned to another
	// runner.
	RecoverySeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "agentbus_runner_recovery_seconds",
		Help:    "Time from a runner's lease lapsing until each of its sessions is assigned to another runner.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
	})
)

var (
	capacityDesc = prometheus.NewDesc("agentbus_runner_capacity",
		"How many sidecars the runner runs at most, from its lease.", []string{"runner"}, nil)
	sessionsDesc = prometheus.NewDesc("agentbus_runner_sessions",
		"Sessions assigned to the runner: the slots it uses.", []string{"runner"}, nil)
	leaseAgeDesc = prometheus.NewDesc("agentbus_runner_lease_age_seconds",
		"Time since the runner's lease was last renewed, as the NATS server stored it.", []string{"runner"}, nil)
	drainingDesc = prometheus.NewDesc("agentbus_runner_draining",
		"1 while the runner drains, 0 otherwise.", []string{"runner"}, nil)
)

// Collector exports each runner with a lease, read at scrape time: its
// capacity, the sessions assigned to it, its lease's age and whether it
// drains.
type Collector struct {
	Store *Store

	once  sync.Once
	cache *Cache
	err   error
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{capacityDesc, sessionsDesc, leaseAgeDesc, drainingDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. The assignments are watched
// from the first scrape on, so a scrape reads only the leases.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.once.Do(func() { c.cache, c.err = c.Store.Watch(context.Background()) })
	if c.err != nil {
		ch <- prometheus.NewInvalidMetric(sessionsDesc, c.err)
		return
	}
	leases, err := c.Store.Leases(context.Background())
	if err != nil {
		ch <- prometheus.NewInvalidMetric(capacityDesc, err)
		return
	}
	load, now := c.cache.Load(), time.Now()
	for name, e := range leases {
		draining := 0.0
		if e.Draining {
			draining = 1
		}
		ch <- prometheus.MustNewConstMetric(capacityDesc, prometheus.GaugeValue, float64(e.Capacity), name)
		ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(load[name]), name)
		ch <- prometheus.MustNewConstMetric(leaseAgeDesc, prometheus.GaugeValue, max(0, now.Sub(e.Renewed).Seconds()), name)
		ch <- prometheus.MustNewConstMetric(drainingDesc, prometheus.GaugeValue, draining, name)
	}
}
