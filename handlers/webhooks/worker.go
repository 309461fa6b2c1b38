package webhooks

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/internal/netguard"
	"github.com/agentbus/agentbus/postgres"
)

// Worker is the webhooks worker: the enqueuer and the dispatcher.
type Worker struct {
	cfg     Config
	send    *sender
	metrics *metrics
	log     *slog.Logger
	now     func() time.Time
	random  func() float64
}

// New returns the worker of cfg.
func New(cfg Config) (*Worker, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	policy := netguard.Policy{AllowPrivate: cfg.AllowPrivate, RequireHTTPS: !cfg.AllowPrivate, Switch: AllowPrivateEnv}
	return &Worker{cfg: cfg, send: newSender(policy, cfg.AttemptTimeout), metrics: newMetrics(cfg.Metrics, cfg.DB),
		log: slog.Default().With("component", "webhooks"), now: time.Now, random: rand.Float64}, nil
}

// Run enqueues and delivers until ctx ends.
func (w *Worker) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		// The events are enqueued one at a time, in stream order: the
		// consumer lets one event be unacknowledged at a time
		// (max_ack_pending 1), so after a crash the event in hand is
		// redelivered before any later one is delivered, and a session's
		// deliveries are stored, and so sent, in its order. A consumer
		// with more in flight would hand a new worker later events before
		// the ack wait of the dead one's ran out.
		return bus.Run(ctx, w.cfg.JS, bus.RunnerConfig{
			Stream: bus.StreamEvents, Consumer: Consumer, Handler: w.enqueue,
			Concurrency: 1, OrderKey: sessionKey, RetryInOrder: true, MaxAckPending: 1,
			FilterSubjects: []string{FilterSubject},
		})
	})
	g.Go(func() error { return w.dispatch(ctx) })
	return g.Wait()
}

// FilterSubject selects the events the enqueuer reads: every session's.
var FilterSubject = bus.AggregateEventsFilter(domain.AggregateSession)

// TestDelivery is a delivery to the webhook of an event of type
// domain.WebhookTestEventType, which its owner sends to check their
// receiver; it belongs to no session.
func TestDelivery(webhook uuid.UUID, now time.Time) (postgres.NewDelivery, error) {
	id := uuid.NewString()
	body, err := json.Marshal(Payload{Type: domain.WebhookTestEventType, Timestamp: now.UTC(), Data: EventData{EventID: id, Event: []byte(`{}`)}})
	return postgres.NewDelivery{ID: DeliveryID(webhook, id), WebhookID: webhook, EventID: id, EventType: domain.WebhookTestEventType,
		Body: body, EnqueuedAt: now}, err
}

// sessionKey orders the events by their session (agents.evt.session.<id>.…).
func sessionKey(m jetstream.Msg) string {
	if id, ok := bus.EventAggregateID(m.Subject()); ok {
		return id
	}
	return m.Subject()
}
