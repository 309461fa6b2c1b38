package main

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentbus/agentbus/internal/metrics"
	"github.com/agentbus/agentbus/postgres/queries"
)

// Metrics returns the process's metrics registry, with collectors reading
// what the process is connected to: JetStream consumers and dead letters,
// the relay's lag on the Redis streams, the outbox and the pools.
func (in *infra) Metrics() (*prometheus.Registry, error) {
	if in.metrics != nil {
		return in.metrics, nil
	}
	reg := metrics.NewRegistry()
	if in.JS != nil {
		reg.MustRegister(metrics.JetStream{JS: in.JS})
	}
	if in.Redis != nil {
		reg.MustRegister(metrics.Relay{Redis: in.Redis})
	}
	if in.Pool != nil {
		pool, err := in.sessionPool()
		if err != nil {
			return nil, err
		}
		reg.MustRegister(metrics.Store{Queries: queries.New(in.Pool, pool)})
	}
	in.metrics = reg
	return reg, nil
}

// withMetrics serves /metrics from reg and everything else from h.
func withMetrics(h http.Handler, reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler(reg))
	mux.Handle("/", h)
	return mux
}
