package api

import (
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the API's own measurements; nil when Deps.Metrics is nil.
type metrics struct {
	requests   *prometheus.HistogramVec
	sseClients prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		return nil
	}
	m := &metrics{
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentbus_http_request_duration_seconds",
			Help:    "Time to answer an API request, by OpenAPI operation id and status code (a live stream counts until it ends).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"operation", "code"}),
		sseClients: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentbus_sse_clients",
			Help: "Live event streams (SSE) being served.",
		}),
	}
	reg.MustRegister(m.requests, m.sseClients)
	return m
}

// observe is the middleware timing each operation.
func (m *metrics) observe(ctx huma.Context, next func(huma.Context)) {
	start := time.Now()
	next(ctx)
	op := "unknown"
	if o := ctx.Operation(); o != nil && o.OperationID != "" {
		op = o.OperationID
	}
	m.requests.WithLabelValues(op, strconv.Itoa(ctx.Status())).Observe(time.Since(start).Seconds())
}

// streamOpened counts a live stream until the returned func is called.
func (m *metrics) streamOpened() func() {
	if m == nil {
		return func() {}
	}
	m.sseClients.Inc()
	return m.sseClients.Dec
}
