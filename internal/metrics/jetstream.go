package metrics

import (
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentbus/agentbus/bus"
)

var (
	consumerPending = prometheus.NewDesc("agentbus_consumer_pending_messages",
		"Messages of the stream the durable consumer has not delivered yet.", []string{"stream", "consumer"}, nil)
	consumerAckPending = prometheus.NewDesc("agentbus_consumer_ack_pending_messages",
		"Messages delivered to the consumer and not acknowledged yet.", []string{"stream", "consumer"}, nil)
	consumerRedelivered = prometheus.NewDesc("agentbus_consumer_redelivered_messages",
		"Messages delivered to the consumer more than once and not acknowledged yet.", []string{"stream", "consumer"}, nil)
	consumerWaiting = prometheus.NewDesc("agentbus_consumer_waiting_pulls",
		"Pull requests waiting on the consumer: 0 means no worker reads it.", []string{"stream", "consumer"}, nil)
	deadLetters = prometheus.NewDesc("agentbus_dead_letters",
		"Messages in AGENTS_DLQ, by the consumer that gave up on them.", []string{"consumer"}, nil)
	streamMessages = prometheus.NewDesc("agentbus_stream_messages_total",
		"Messages ever stored in the stream (its last sequence); rate() gives messages per second, "+
			"on AGENTS_SIDECAR_EVENTS the relay's events per second.", []string{"stream"}, nil)
)

// JetStream collects, at each scrape, the state of every durable consumer
// of the agentbus streams and the dead letters per consumer.
type JetStream struct {
	JS jetstream.JetStream
}

// Describe implements prometheus.Collector.
func (c JetStream) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{consumerPending, consumerAckPending, consumerRedelivered, consumerWaiting, deadLetters, streamMessages} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c JetStream) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := scrapeContext()
	defer cancel()
	streams := c.JS.ListStreams(ctx)
	for s := range streams.Info() {
		name := s.Config.Name
		if !strings.HasPrefix(name, "AGENTS_") {
			continue
		}
		ch <- prometheus.MustNewConstMetric(streamMessages, prometheus.CounterValue, float64(s.State.LastSeq), name)
		if name == bus.StreamDLQ {
			c.collectDLQ(ch)
		}
		stream, err := c.JS.Stream(ctx, name)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(consumerPending, err)
			continue
		}
		consumers := stream.ListConsumers(ctx)
		for info := range consumers.Info() {
			if info.Config.Durable == "" {
				continue // a live stream's ephemeral consumer
			}
			ch <- prometheus.MustNewConstMetric(consumerPending, prometheus.GaugeValue, float64(info.NumPending), name, info.Name)
			ch <- prometheus.MustNewConstMetric(consumerAckPending, prometheus.GaugeValue, float64(info.NumAckPending), name, info.Name)
			ch <- prometheus.MustNewConstMetric(consumerRedelivered, prometheus.GaugeValue, float64(info.NumRedelivered), name, info.Name)
			ch <- prometheus.MustNewConstMetric(consumerWaiting, prometheus.GaugeValue, float64(info.NumWaiting), name, info.Name)
		}
		if err := consumers.Err(); err != nil {
			ch <- prometheus.NewInvalidMetric(consumerPending, err)
		}
	}
	if err := streams.Err(); err != nil {
		ch <- prometheus.NewInvalidMetric(streamMessages, err)
	}
}

// collectDLQ counts the dead letters under agents.dlq.<consumer>.
func (c JetStream) collectDLQ(ch chan<- prometheus.Metric) {
	ctx, cancel := scrapeContext()
	defer cancel()
	dlq, err := c.JS.Stream(ctx, bus.StreamDLQ)
	if err == nil {
		var info *jetstream.StreamInfo
		if info, err = dlq.Info(ctx, jetstream.WithSubjectFilter(bus.DLQSubject(">"))); err == nil {
			for subject, n := range info.State.Subjects {
				ch <- prometheus.MustNewConstMetric(deadLetters, prometheus.GaugeValue, float64(n), strings.TrimPrefix(subject, bus.DLQSubject("")))
			}
			return
		}
	}
	ch <- prometheus.NewInvalidMetric(deadLetters, err)
}
