// Package webhooks is the webhooks worker: it turns the events of an
// owner's sessions into signed HTTP posts to the owner's endpoints, in the
// Standard Webhooks format, at least once and in order per session and
// endpoint.
//
// Two parts, so that no endpoint holds back another: the enqueuer, a
// durable consumer of AGENTS_EVENTS, writes one delivery row per event
// and matching webhook (idempotently, by the event id and the webhook)
// before it acks the event; the dispatcher runs one loop per endpoint with
// due deliveries, each taking its rows for an attempt under a lease, so a
// worker killed anywhere leaves the row to be sent again.
package webhooks

import (
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentbus/agentbus/domain"
)

// Consumer is the enqueuer's durable consumer on AGENTS_EVENTS. Renaming
// it enqueues every stored event again (each delivery is stored once, but
// a new webhook would get the past events): keep it stable.
const Consumer = "webhooks"

// AllowPrivateEnv names the operator's switch that lets webhooks post to
// loopback and private addresses over http (tests, a local setup).
const AllowPrivateEnv = "AGENTBUS_WEBHOOK_ALLOW_PRIVATE"

// Config configures the worker.
type Config struct {
	// DB holds the webhooks and their deliveries. Required.
	DB *pgxpool.Pool
	// JS is the JetStream the enqueuer consumes. Required.
	JS jetstream.JetStream
	// AllowPrivate lets endpoints be loopback or private addresses, over
	// http too; link-local and metadata addresses are refused regardless.
	AllowPrivate bool
	// RetrySchedule is the wait before each retry of a failed delivery.
	// Default domain.DefaultWebhookRetrySchedule.
	RetrySchedule []time.Duration
	// AttemptTimeout bounds one attempt, from dialling to the response's
	// status. Default 10s.
	AttemptTimeout time.Duration
	// DisableAfter is how many deliveries in a row may fail before their
	// webhook is disabled. Default domain.DefaultWebhookDisableAfter.
	DisableAfter int
	// PollInterval is how often the dispatcher looks for due deliveries
	// besides the enqueuer's notifications (retries come due by time).
	// Default 1s.
	PollInterval time.Duration
	// LinkBase is the API's public URL, from which each event's data links
	// to its session. Default "" (a path only).
	LinkBase string
	// Metrics receives the deliveries' outcomes, latencies and queue ages;
	// nil measures nothing.
	Metrics prometheus.Registerer
}

func (c *Config) setDefaults() {
	if len(c.RetrySchedule) == 0 {
		c.RetrySchedule = domain.DefaultWebhookRetrySchedule
	}
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = 10 * time.Second
	}
	if c.DisableAfter == 0 {
		c.DisableAfter = domain.DefaultWebhookDisableAfter
	}
	if c.PollInterval == 0 {
		c.PollInterval = time.Second
	}
}

// Validate reports what is missing or wrong.
func (c *Config) Validate() error {
	switch {
	case c.DB == nil:
		return errors.New("webhooks: DB is required")
	case c.JS == nil:
		return errors.New("webhooks: JS is required")
	case c.AttemptTimeout < 0, c.PollInterval < 0, c.DisableAfter < 0:
		return errors.New("webhooks: timeouts, intervals and limits must be positive")
	}
	for _, d := range c.RetrySchedule {
		if d <= 0 {
			return errors.New("webhooks: every wait of the retry schedule must be positive")
		}
	}
	return nil
}

// lease is how long an attempt holds its delivery: past it, a worker that
// died during the attempt has its delivery taken again.
func (c *Config) lease() time.Duration { return c.AttemptTimeout + 5*time.Second }
