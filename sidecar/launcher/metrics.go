package launcher

import "github.com/prometheus/client_golang/prometheus"

// Metrics of the launchers of this process; register them to expose them
// (metrics.NewRegistry does).
var (
	// Live is the number of sidecar processes the launchers watch.
	Live = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "agentbus_sidecars",
		Help: "Sidecar processes running, watched by this process's launcher.",
	})
	// Starts counts the sidecars started, restart="true" for a session
	// whose sidecar crashed before.
	Starts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentbus_sidecar_starts_total",
		Help: "Sidecar processes started; restart=\"true\" for a session whose sidecar had crashed.",
	}, []string{"restart"})
)
