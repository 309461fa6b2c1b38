package bus

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Handler handles one message delivered by Run. The contract:
//
//   - it returns nil: the message is acknowledged and not delivered again;
//   - it returns an error: the message is negatively acknowledged and
//     redelivered after the backoff for its delivery count;
//   - it returns Permanent(err), or fails on the last allowed delivery: the
//     message is terminated and a copy goes to agents.dlq.<consumer> with the
//     error in the Agents-Error header, and the runner goes on;
//   - it panics: that counts as an error.
//
// Delivery is at least once, so a handler must be idempotent, keyed by the
// message id. While it runs, Run tells the server it is still working
// (InProgress) so a long handler is not redelivered elsewhere. ctx carries the
// message's traceparent and is not cancelled when Run's context ends, only
// RunnerConfig.ShutdownTimeout later.
type Handler func(ctx context.Context, m jetstream.Msg) error

// RunnerConfig configures Run.
type RunnerConfig struct {
	// Stream is the stream the consumer reads. Required.
	Stream string
	// Consumer is the durable consumer's name, derived from the handler's
	// stable name (projections, reactions, acl). Required.
	//
	// Renaming it creates a new consumer that consumes the stream again
	// from its first message, and leaves the old one behind: choose it once.
	Consumer string
	// Handler handles each message. Required.
	Handler Handler
	// Concurrency is how many messages this process handles at once. Several
	// processes running the same consumer share its messages. Default 1.
	Concurrency int
	// OrderKey, when set, makes messages with the same key run one at a time
	// in stream order (BySubject keeps each subject in order), while
	// different keys run concurrently. A failed message is redelivered after
	// its backoff, so later messages of its key may be handled before it.
	OrderKey func(jetstream.Msg) string
	// BatchSize is how many messages are fetched ahead of the handlers.
	// A fetched message's ack wait runs while it waits, so keep BatchSize /
	// Concurrency × handler time below the ack wait. Default max(16, 2×Concurrency).
	BatchSize int
	// MaxDeliver is how many times the handler is tried before the message
	// is dead-lettered, when the consumer's max_deliver does not say.
	// Default 5. The consumer is given max_deliver = MaxDeliver+1: the spare
	// delivery dead-letters, without calling the handler, a message whose
	// handler never returned (the process crashed on it each time), so a
	// poison message cannot stall the consumer. Likewise a defined consumer
	// with max_deliver N gives N-1 handler attempts.
	MaxDeliver int
	// Backoff is the redelivery delay after the n-th failed attempt (the
	// last value repeats), used when the consumer has no backoff of its own.
	// Default 1s, 5s, 30s, 2m.
	Backoff []time.Duration
	// FilterSubjects selects the stream's subjects for a consumer created
	// from this config; empty means all of them.
	FilterSubjects []string
	// AckWait is the ack wait of a consumer created from this config.
	// Default 30s.
	AckWait time.Duration
	// MaxAckPending bounds the unacknowledged messages of a consumer created
	// from this config, over all processes. Default 1000.
	MaxAckPending int
	// IdleHeartbeat is how often the server confirms an idle pull is alive;
	// after two missed heartbeats the runner pulls again, and after three it
	// re-subscribes. Default 5s, at most 15s.
	IdleHeartbeat time.Duration
	// ShutdownTimeout is how long in-flight handlers may go on after Run's
	// context ends before their context is cancelled. Default 30s.
	ShutdownTimeout time.Duration
	// Definitions hold the consumer definitions from the nats/ folder; nil
	// means the embedded ones. A defined consumer is created from its file
	// when missing and otherwise used as it is (Provision updates it); an
	// undefined one is created or updated from this config.
	Definitions *Definitions
	// Logger receives the runner's log; nil means slog.Default().
	Logger *slog.Logger
}

func (c *RunnerConfig) setDefaults() error {
	if c.Concurrency <= 0 {
		c.Concurrency = 1
	}
	if c.BatchSize <= 0 {
		c.BatchSize = max(16, 2*c.Concurrency)
	}
	if c.MaxDeliver <= 0 {
		c.MaxDeliver = 5
	}
	if len(c.Backoff) == 0 {
		c.Backoff = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute}
	}
	if c.AckWait <= 0 {
		c.AckWait = 30 * time.Second
	}
	if c.MaxAckPending <= 0 {
		c.MaxAckPending = 1000
	}
	if c.IdleHeartbeat <= 0 {
		c.IdleHeartbeat = 5 * time.Second
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Definitions == nil {
		defs, err := DefaultDefinitions()
		if err != nil {
			return err
		}
		c.Definitions = defs
	}
	return nil
}

// Validate reports a configuration Run cannot work with.
func (c RunnerConfig) Validate() error {
	switch {
	case c.Stream == "":
		return errors.New("bus: RunnerConfig.Stream is required")
	case c.Consumer == "":
		return errors.New("bus: RunnerConfig.Consumer is required")
	case strings.ContainsAny(c.Consumer, ".*> \t\r\n/\\"):
		return fmt.Errorf("bus: RunnerConfig.Consumer %q must be a single subject token", c.Consumer)
	case c.Handler == nil:
		return errors.New("bus: RunnerConfig.Handler is required")
	case c.IdleHeartbeat > 15*time.Second:
		return errors.New("bus: RunnerConfig.IdleHeartbeat must be at most 15s")
	}
	return nil
}

// BySubject is an OrderKey that keeps the messages of each subject in order.
func BySubject(m jetstream.Msg) string { return m.Subject() }

// Run consumes the durable pull consumer cfg.Consumer on cfg.Stream and hands
// every message to cfg.Handler (see Handler for the ack contract) until ctx
// ends. Then it stops fetching, hands the fetched but unstarted messages
// back to the server, lets the running handlers finish, and returns nil.
// It returns an error only for an invalid configuration.
//
// Run survives server restarts and lost connections: it pulls with idle
// heartbeats, pulls again when they stop, and looks up or creates the
// consumer again when the server lost it.
func Run(ctx context.Context, js jetstream.JetStream, cfg RunnerConfig) error {
	if err := cfg.setDefaults(); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	r := &runner{
		js:     js,
		cfg:    cfg,
		def:    cfg.Definitions.Consumer(cfg.Stream, cfg.Consumer),
		logger: cfg.Logger.With("stream", cfg.Stream, "consumer", cfg.Consumer),
	}

	// Handlers outlive ctx so that in-flight messages finish, but no longer
	// than ShutdownTimeout.
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	go func() {
		select {
		case <-ctx.Done():
			grace := time.NewTimer(cfg.ShutdownTimeout)
			defer grace.Stop()
			select {
			case <-grace.C:
				cancelBase()
			case <-base.Done():
			}
		case <-base.Done():
		}
	}()

	// Without an OrderKey every worker reads one shared lane; with one, each
	// worker owns a lane and a key always maps to the same lane.
	lanes := make([]chan jetstream.Msg, 1)
	if cfg.OrderKey != nil {
		lanes = make([]chan jetstream.Msg, cfg.Concurrency)
	}
	for i := range lanes {
		lanes[i] = make(chan jetstream.Msg)
	}
	r.lanes = lanes
	var wg sync.WaitGroup
	for i := range cfg.Concurrency {
		lane := lanes[i%len(lanes)]
		wg.Go(func() {
			for m := range lane {
				r.handle(base, m)
			}
		})
	}

	r.logger.Info("runner started", "concurrency", cfg.Concurrency)
	r.consume(ctx)
	for _, lane := range lanes {
		close(lane)
	}
	wg.Wait()
	// Acks are sent without waiting for a reply: push them out before the
	// caller closes the connection.
	if err := js.Conn().FlushTimeout(5 * time.Second); err != nil {
		r.logger.Warn("flushing acks on shutdown", "err", err)
	}
	r.logger.Info("runner stopped")
	return nil
}

type runner struct {
	js     jetstream.JetStream
	cfg    RunnerConfig
	def    *jetstream.ConsumerConfig
	logger *slog.Logger
	lanes  []chan jetstream.Msg
	policy atomic.Pointer[policy]
}

// consume subscribes to the consumer and pumps its messages to the lanes
// until ctx ends, subscribing again whenever the subscription breaks.
func (r *runner) consume(ctx context.Context) {
	retry := time.Duration(0)
	for ctx.Err() == nil {
		if retry > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(retry):
			}
		}
		retry = min(max(2*retry, 100*time.Millisecond), 5*time.Second)

		cons, err := r.consumer(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.logger.Warn("consumer unavailable, retrying", "err", err, "retry_in", retry)
			}
			continue
		}
		r.policy.Store(r.policyFrom(cons.CachedInfo()))
		it, err := cons.Messages(
			jetstream.PullMaxMessages(r.cfg.BatchSize),
			jetstream.PullHeartbeat(r.cfg.IdleHeartbeat),
			jetstream.WithMessagesErrOnMissingHeartbeat(true),
		)
		if err != nil {
			r.logger.Warn("subscribing failed, retrying", "err", err, "retry_in", retry)
			continue
		}
		received, err := r.pump(ctx, it)
		if received {
			retry = 0
		}
		if err != nil {
			r.logger.Warn("subscription broken, subscribing again", "err", err)
		}
	}
}

// pump moves messages from it to the lanes. It returns when ctx ends (after
// handing the fetched messages back) or when the subscription breaks.
func (r *runner) pump(ctx context.Context, it jetstream.MessagesContext) (received bool, err error) {
	missed := 0
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				r.handBack(it)
				return received, nil
			}
			// The iterator pulls again by itself after a missed heartbeat;
			// if that keeps failing, start over with a fresh subscription.
			if errors.Is(err, jetstream.ErrNoHeartbeat) {
				if missed++; missed < 3 {
					r.logger.Debug("missed idle heartbeat, pulling again", "missed", missed)
					continue
				}
			}
			it.Stop()
			return received, err
		}
		received, missed = true, 0
		lane := r.lanes[0]
		if r.cfg.OrderKey != nil {
			h := fnv.New32a()
			h.Write([]byte(r.cfg.OrderKey(m)))
			lane = r.lanes[h.Sum32()%uint32(len(r.lanes))]
		}
		select {
		case lane <- m:
		case <-ctx.Done():
			r.nakNow(m)
			r.handBack(it)
			return received, nil
		}
	}
}

// handBack stops fetching and returns the fetched messages no handler
// started to the server at once, so another process can take them.
func (r *runner) handBack(it jetstream.MessagesContext) {
	it.Drain()
	for {
		m, err := it.Next(jetstream.NextMaxWait(time.Second))
		if err != nil {
			it.Stop()
			return
		}
		r.nakNow(m)
	}
}

func (r *runner) nakNow(m jetstream.Msg) {
	if err := m.Nak(); err != nil {
		r.logger.Debug("handing a message back", "subject", m.Subject(), "err", err)
	}
}

// consumer looks up the durable consumer, creating it when missing: from its
// definition when there is one, else from the RunnerConfig, which then also
// updates it.
func (r *runner) consumer(ctx context.Context) (jetstream.Consumer, error) {
	ctx, cancel := context.WithTimeout(ctx, r.js.Options().DefaultTimeout)
	defer cancel()
	if r.def == nil {
		return r.js.CreateOrUpdateConsumer(ctx, r.cfg.Stream, r.consumerConfig())
	}
	cons, err := r.js.Consumer(ctx, r.cfg.Stream, r.cfg.Consumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		r.logger.Info("creating consumer from its definition")
		return r.js.CreateOrUpdateConsumer(ctx, r.cfg.Stream, *r.def)
	}
	return cons, err
}

func (r *runner) consumerConfig() jetstream.ConsumerConfig {
	cfg := jetstream.ConsumerConfig{
		Durable:       r.cfg.Consumer,
		Description:   "created by bus.Run",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       r.cfg.AckWait,
		MaxDeliver:    r.cfg.MaxDeliver + 1,
		MaxAckPending: r.cfg.MaxAckPending,
	}
	if len(r.cfg.FilterSubjects) == 1 {
		cfg.FilterSubject = r.cfg.FilterSubjects[0]
	} else {
		cfg.FilterSubjects = r.cfg.FilterSubjects
	}
	return cfg
}

// policy is how the runner treats deliveries, from the consumer's settings
// on the server.
type policy struct {
	attempts      int
	backoff       []time.Duration
	ackWait       time.Duration
	serverBackoff []time.Duration
}

func (r *runner) policyFrom(info *jetstream.ConsumerInfo) *policy {
	p := &policy{attempts: r.cfg.MaxDeliver, backoff: r.cfg.Backoff, ackWait: r.cfg.AckWait}
	if info == nil {
		return p
	}
	c := info.Config
	switch {
	case c.MaxDeliver > 1:
		p.attempts = c.MaxDeliver - 1
	case c.MaxDeliver == 1:
		p.attempts = 1
	}
	if len(c.BackOff) > 0 {
		p.backoff, p.serverBackoff = c.BackOff, c.BackOff
	}
	if c.AckWait > 0 {
		p.ackWait = c.AckWait
	}
	return p
}

// delay is the redelivery delay after the n-th delivery failed.
func (p *policy) delay(n uint64) time.Duration {
	return p.backoff[min(max(int(n), 1), len(p.backoff))-1]
}

// ackDeadline is how long the server waits for the n-th delivery's ack: with
// a backoff on the consumer, its n-th value replaces the ack wait.
func (p *policy) ackDeadline(n uint64) time.Duration {
	if len(p.serverBackoff) > 0 {
		return p.serverBackoff[min(max(int(n), 1), len(p.serverBackoff))-1]
	}
	return p.ackWait
}
