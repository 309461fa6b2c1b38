package command

import (
	"encoding/json"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentbus/agentbus/domain"
)

// Latency is the time from sending a command to receiving its result
// (Client.Do), by command and outcome ("applied", "refused" or "timeout").
// Register it to expose it; metrics.NewRegistry does.
var Latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "agentbus_command_duration_seconds",
	Help:    "Time from sending a command to its result, by command and outcome (applied, refused, timeout).",
	Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
}, []string{"command", "outcome"})

// SteeringLatency is the time a message waits for its session: from its
// enqueueing to the sidecar's message_delivered, as the queue recorded
// both, by the priority it was delivered with. It is observed where the
// delivery is recorded (Client.Do of mark_delivered). Register it to
// expose it; metrics.NewRegistry does.
var SteeringLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "agentbus_steering_latency_seconds",
	Help:    "Time from enqueueing a message for a session to the sidecar's message_delivered, by priority (Immediate, Queued).",
	Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900},
}, []string{"priority"})

// observeSteering records the steering latency of the message a
// mark_delivered command marked delivered.
func observeSteering(cmd Command, r Result) {
	if cmd.Aggregate != domain.AggregateQueue || cmd.Name != MarkDelivered || r.Error != nil {
		return
	}
	var in MessageData
	var state QueueState
	if json.Unmarshal(cmd.Data, &in) != nil || json.Unmarshal(r.State, &state) != nil {
		return
	}
	for _, m := range state.Settled {
		if m.MessageID == in.MessageID && m.DeliveredAt != nil {
			SteeringLatency.WithLabelValues(string(m.Priority)).Observe(m.DeliveredAt.Sub(m.CreatedAt).Seconds())
			return
		}
	}
}
