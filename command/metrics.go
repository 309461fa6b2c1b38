package command

import "github.com/prometheus/client_golang/prometheus"

// Latency is the time from sending a command to receiving its result
// (Client.Do), by command and outcome ("applied", "refused" or "timeout").
// Register it to expose it; metrics.NewRegistry does.
var Latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "agentbus_command_duration_seconds",
	Help:    "Time from sending a command to its result, by command and outcome (applied, refused, timeout).",
	Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
}, []string{"command", "outcome"})
