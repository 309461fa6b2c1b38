package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Run consumes the durable pull consumer cfg.Consumer on cfg.Stream and hands
// every message to cfg.Handler (see Handler for the ack contract) until ctx
// ends. Then it stops fetching, hands the fetched but unstarted messages
// back to the server, lets the running handlers finish, and returns nil.
// It returns an error only for an invalid configuration or a closed
// connection.
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
	if err := r.checkDefinition(); err != nil {
		return err
	}

	base, cancelBase := r.handlerContext(ctx)
	defer cancelBase()
	r.base = base
	r.stopping = ctx

	// With an OrderKey each worker owns a lane and a key always maps to
	// the same lane. Without one there are no lanes: the workers take
	// their messages from the subscription themselves (see share).
	var wg sync.WaitGroup
	if cfg.OrderKey != nil {
		r.startLanes(ctx, base, &wg)
	}

	r.logger.Info("runner started", "concurrency", cfg.Concurrency)
	err := r.consume(ctx)
	r.closeLanes()
	wg.Wait()
	if err != nil {
		r.logger.Error("runner stopped", "err", err)
		return err
	}
	r.finish(base)
	return nil
}

// handlerContext is the context handlers run in: it outlives ctx so that
// in-flight messages finish, but no longer than ShutdownTimeout.
func (r *runner) handlerContext(ctx context.Context) (context.Context, context.CancelFunc) {
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		select {
		case <-ctx.Done():
			grace := time.NewTimer(r.cfg.ShutdownTimeout)
			defer grace.Stop()
			select {
			case <-grace.C:
				cancelBase()
			case <-base.Done():
			}
		case <-base.Done():
		}
	}()
	return base, cancelBase
}

// finish pushes out the acks of a clean stop and unpins this copy.
func (r *runner) finish(base context.Context) {
	// Acks are sent without waiting for a reply: push them out before the
	// caller closes the connection.
	if err := r.js.Conn().FlushTimeout(5 * time.Second); err != nil {
		r.logger.Warn("flushing acks on shutdown", "err", err)
	}
	// Only when every handler finished: a message cut off by the grace
	// period is redelivered later, and another copy must not overtake it.
	if base.Err() == nil {
		r.unpin()
	}
	r.logger.Info("runner stopped")
}

type runner struct {
	js     jetstream.JetStream
	cfg    RunnerConfig
	def    *jetstream.ConsumerConfig
	logger *slog.Logger
	// base is the context handlers run in (see Run).
	base context.Context
	// stopping is Run's context: once it ends, a message held while its
	// handler's servers are unavailable is handed back (see attempt).
	stopping context.Context
	lanes    []*lane
	policy   atomic.Pointer[policy]
	// pin is the id this copy was last pinned with in a priority group.
	pin atomic.Value
}

// headerPinID carries, on a message of a pinned_client consumer, the id the
// receiving client is pinned with.
const headerPinID = "Nats-Pin-Id"

// unpin hands the priority groups this copy is pinned in to another copy
// at once, instead of after their timeout: on a clean stop every message
// it took is settled, so nothing of a key is left for the next copy to
// overtake. A group another copy holds by now is left alone.
func (r *runner) unpin() {
	pin, _ := r.pin.Load().(string)
	if pin == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := r.js.Consumer(ctx, r.cfg.Stream, r.cfg.Consumer)
	if err != nil {
		r.logger.Warn("not unpinned on stop", "err", err)
		return
	}
	info, err := c.Info(ctx)
	if err != nil {
		r.logger.Warn("not unpinned on stop", "err", err)
		return
	}
	for _, g := range info.PriorityGroups {
		if g.PinnedClientID != pin {
			continue
		}
		stream, err := r.js.Stream(ctx, r.cfg.Stream)
		if err == nil {
			err = stream.UnpinConsumer(ctx, r.cfg.Consumer, g.Group)
		}
		if err != nil {
			r.logger.Warn("not unpinned on stop", "group", g.Group, "err", err)
		}
	}
}

// consume subscribes to the consumer and pumps its messages to the lanes
// until ctx ends, subscribing again whenever the subscription breaks. It
// gives up only when the connection was closed, which never reopens.
func (r *runner) consume(ctx context.Context) error {
	retry := time.Duration(0)
	for ctx.Err() == nil {
		if retry > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(retry):
			}
		}
		if r.js.Conn().IsClosed() {
			return fmt.Errorf("bus: run %s: %w", r.cfg.Consumer, nats.ErrConnectionClosed)
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
		it, err := cons.Messages(r.pullOptions(cons.CachedInfo())...)
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
	return nil
}

// pump moves messages from it to the lanes. It returns when ctx ends (after
// handing the fetched messages back) or when the subscription breaks.
func (r *runner) pump(ctx context.Context, it jetstream.MessagesContext) (received bool, err error) {
	if r.lanes == nil {
		return r.share(ctx, it)
	}
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
		r.notePin(m)
		r.laneOf(m).push(m)
	}
}

// share runs the workers of a runner without an OrderKey on it: each one
// takes its next message from the subscription and handles it, so a
// message goes from the connection to its handler without waiting for
// another goroutine to pass it on. It returns when ctx ends (after handing
// the fetched messages back and letting the running handlers finish) or
// when the subscription breaks (once the running handlers finished).
func (r *runner) share(ctx context.Context, it jetstream.MessagesContext) (received bool, err error) {
	var (
		got, broken atomic.Bool
		missed      atomic.Int32
		mu          sync.Mutex
		first       error
		wg          sync.WaitGroup
	)
	for range r.cfg.Concurrency {
		wg.Go(func() {
			for {
				m, err := it.Next(jetstream.NextContext(ctx))
				if ctx.Err() != nil {
					if err == nil {
						r.nakNow(m)
					}
					return
				}
				if err != nil {
					// The iterator pulls again by itself after a missed
					// heartbeat; if that keeps failing, start over with a
					// fresh subscription.
					if errors.Is(err, jetstream.ErrNoHeartbeat) && missed.Add(1) < 3 {
						r.logger.Debug("missed idle heartbeat, pulling again", "missed", missed.Load())
						continue
					}
					if broken.Swap(true) {
						return // another worker stopped it
					}
					mu.Lock()
					first = err
					mu.Unlock()
					it.Stop()
					return
				}
				got.Store(true)
				missed.Store(0)
				r.notePin(m)
				if r.cfg.BatchHandler == nil {
					r.handle(r.base, m)
				} else {
					r.handleBatch(r.base, []jetstream.Msg{m})
				}
			}
		})
	}
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		close(finished)
	}()
	select {
	case <-ctx.Done():
		// The workers stop taking messages; what was fetched goes back
		// while the running handlers finish.
		r.handBack(it)
		<-finished
		return got.Load(), nil
	case <-finished:
	}
	if ctx.Err() != nil {
		r.handBack(it)
		return got.Load(), nil
	}
	mu.Lock()
	defer mu.Unlock()
	return got.Load(), first
}

// notePin remembers the id this copy is pinned with, from a message of a
// pinned priority group.
func (r *runner) notePin(m jetstream.Msg) {
	if pin := m.Headers().Get(headerPinID); pin != "" {
		r.pin.Store(pin)
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

// checkDefinition refuses a consumer file that selects other subjects than
// the runner was written for: the file wins on the server, so a drift
// would silently feed the handler the wrong messages.
func (r *runner) checkDefinition() error {
	if r.def == nil || len(r.cfg.FilterSubjects) == 0 {
		return nil
	}
	defined := r.def.FilterSubjects
	if r.def.FilterSubject != "" {
		defined = append([]string{r.def.FilterSubject}, defined...)
	}
	want := slices.Sorted(slices.Values(r.cfg.FilterSubjects))
	if got := slices.Sorted(slices.Values(defined)); !slices.Equal(got, want) {
		return fmt.Errorf("bus: consumer %s/%s is defined with filters %v, its runner wants %v", r.cfg.Stream, r.cfg.Consumer, got, want)
	}
	return nil
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

// pullOptions are the options of the runner's pull subscription. On a
// consumer with a pinned priority group, the runner pulls in that group:
// the server then delivers to one process at a time (the pinned one) and
// pins another once that one stops pulling for the group's timeout, so
// the order a key's messages are handled in holds across processes, not
// only within one. A pull request is renewed well within that timeout, so
// a pinned process that is idle stays pinned.
func (r *runner) pullOptions(info *jetstream.ConsumerInfo) []jetstream.PullMessagesOpt {
	heartbeat := r.cfg.IdleHeartbeat
	opts := []jetstream.PullMessagesOpt{
		jetstream.PullMaxMessages(r.cfg.BatchSize),
		jetstream.WithMessagesErrOnMissingHeartbeat(true),
	}
	if info != nil && info.Config.PriorityPolicy == jetstream.PriorityPolicyPinned && len(info.Config.PriorityGroups) > 0 {
		expiry := max(min(30*time.Second, info.Config.PinnedTTL/3), time.Second)
		heartbeat = min(heartbeat, expiry/2)
		opts = append(opts, jetstream.PullPriorityGroup(info.Config.PriorityGroups[0]), jetstream.PullExpiry(expiry))
	}
	return append(opts, jetstream.PullHeartbeat(heartbeat))
}

// orderedGroup is the pinned priority group of the consumers the runner
// creates for an OrderKey, and orderedTakeover how long a process that
// stopped pulling stays pinned before another one is.
const (
	orderedGroup    = "ordered"
	orderedTakeover = 30 * time.Second
)

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
	if r.cfg.OrderKey != nil {
		cfg.PriorityGroups = []string{orderedGroup}
		cfg.PriorityPolicy = jetstream.PriorityPolicyPinned
		cfg.PinnedTTL = orderedTakeover
	}
	if len(r.cfg.FilterSubjects) == 1 {
		cfg.FilterSubject = r.cfg.FilterSubjects[0]
	} else {
		cfg.FilterSubjects = r.cfg.FilterSubjects
	}
	return cfg
}

// policy is how the runner treats deliveries, from the consumer's settings
// on the server and in its file.
type policy struct {
	attempts      int
	backoff       []time.Duration
	ackWait       time.Duration
	serverBackoff []time.Duration
}

func (r *runner) policyFrom(info *jetstream.ConsumerInfo) *policy {
	p := &policy{attempts: r.cfg.MaxDeliver, backoff: r.cfg.Backoff, ackWait: r.cfg.AckWait}
	if retries := r.cfg.Definitions.RetryBackoff(r.cfg.Stream, r.cfg.Consumer); len(retries) > 0 {
		p.backoff = retries
	}
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
