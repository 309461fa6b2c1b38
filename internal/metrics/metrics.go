// Package metrics serves Prometheus metrics at /metrics. Most of them are
// read from outside at scrape time — JetStream consumer info, the Redis
// streams' consumer groups, the outbox table — so the hot paths carry no
// instrumentation; the few measured inline (HTTP requests, live streams,
// command latency) are registered by their packages on the Registry given.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/sidecar/launcher"
	"github.com/agentbus/agentbus/sidecar/runners"
)

// scrapeTimeout bounds the reads a scrape makes of NATS, Redis and Postgres.
const scrapeTimeout = 5 * time.Second

// NewRegistry returns a registry with the Go runtime and process metrics
// and those measured inline in this process: command and steering latency,
// sidecars, and the placer's placement and recovery times.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		command.Latency, command.SteeringLatency, launcher.Live, launcher.Starts,
		runners.PlacementSeconds, runners.RecoverySeconds)
	return reg
}

// Handler serves reg in the Prometheus exposition format. A collector that
// fails is logged and left out of that scrape; the others are served.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slogLogger{slog.Default().With("component", "metrics")},
		ErrorHandling: promhttp.ContinueOnError,
	})
}

type slogLogger struct{ log *slog.Logger }

func (l slogLogger) Println(v ...any) { l.log.Warn("scrape", "err", v) }

func scrapeContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), scrapeTimeout)
}
