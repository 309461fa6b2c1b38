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
		// One session's events are enqueued one after the other, in stream
		// order, and a failing one is retried before those behind it: its
		// deliveries then reach each endpoint in that order.
		return bus.Run(ctx, w.cfg.JS, bus.RunnerConfig{
			Stream: bus.StreamEvents, Consumer: Consumer, Handler: w.enqueue,
			Concurrency: 4, OrderKey: sessionKey, RetryInOrder: true,
			FilterSubjects: []string{FilterSubject},
		})
	})
	g.Go(func() error { return w.dispatch(ctx) })
	return g.Wait()
}

// FilterSubject selects the events the enqueuer reads: every session's.
const FilterSubject = "agents.evt.session.>"

// TestDelivery is a delivery to the webhook of an event of type
// domain.WebhookTestEventType, which its owner sends to check their
// receiver; it belongs to no session.
func TestDelivery(webhook uuid.UUID, now time.Time) (postgres.NewDelivery, error) {
	id := uuid.NewString()
	body, err := jsonMarshal(Payload{Type: testEventType, Timestamp: now.UTC(), Data: EventData{EventID: id, Event: []byte(`{}`)}})
	return postgres.NewDelivery{ID: DeliveryID(webhook, id), WebhookID: webhook, EventID: id, EventType: testEventType,
		Body: body, EnqueuedAt: now}, err
}

// sessionKey orders the events by their session (agents.evt.session.<id>.…).
func sessionKey(m jetstream.Msg) string {
	if id, ok := bus.EventAggregateID(m.Subject()); ok {
		return id
	}
	return m.Subject()
}

// testEventType is the type of a test delivery.
const testEventType = domain.WebhookTestEventType

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
