package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// MaxBatch is the most messages one atomic batch carries; longer runs are
	// split. Default 1000, the server's default limit.
	MaxBatch int
	// MinBatch is the fewest messages sent as an atomic batch; shorter runs
	// are published one by one, asynchronously. A batch has a fixed cost on
	// the server (it stages the messages in a store of their own) of about
	// ten to thirty single publishes, depending on the disk and the load
	// (BenchmarkPublish). Default 32, where a batch clearly pays off.
	MinBatch int
	// MeasureBatch chooses for each run, in place of MinBatch, the way this
	// publisher measured to be done sooner lately: one atomic batch, or its
	// messages one by one, pipelined. Where the cost of a batch against a
	// single publish changes with the disk and its load, or runs are mostly
	// short, this keeps a run of a few messages from paying a batch's fixed
	// cost, and a longer one from paying an fsync per message.
	MeasureBatch bool
	// MaxInFlight bounds the asynchronous publishes awaiting their ack when
	// messages are not sent as a batch. Default 256.
	MaxInFlight int
	// MaxConcurrentBatches bounds the batches this publisher keeps open at
	// once; the server accepts 50 per stream. Default 8.
	MaxConcurrentBatches int
	// Definitions map subjects to streams, since one batch must stay within
	// one stream. Nil means the definitions embedded from the nats/ folder.
	Definitions *Definitions
	// DisableBatch publishes every message asynchronously instead of in
	// atomic batches: for servers older than 2.12 and for comparison.
	DisableBatch bool
	// Timeout bounds each wait for an ack. Default: the JetStream
	// context's DefaultTimeout.
	Timeout time.Duration
	// Logger receives the fallbacks from batches to single publishes; nil
	// means slog.Default().
	Logger *slog.Logger
}

func (c *PublisherConfig) setDefaults(js jetstream.JetStream) error {
	if c.Timeout <= 0 {
		c.Timeout = js.Options().DefaultTimeout
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 1000
	}
	if c.MinBatch <= 0 {
		c.MinBatch = 32
	}
	if c.MinBatch > c.MaxBatch {
		c.MinBatch = c.MaxBatch
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 256
	}
	if c.MaxConcurrentBatches <= 0 {
		c.MaxConcurrentBatches = 8
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

// Publisher is the one way agentbus publishes to JetStream: single messages
// (Publish, PublishMsg), and ordered runs of messages (PublishMsgs), sent as
// atomic batches when long and pipelined when short. It is safe for
// concurrent use.
type Publisher struct {
	js    jetstream.JetStream
	cfg   PublisherConfig
	slots chan struct{}
	costs *publishCosts // with MeasureBatch

	mu   sync.Mutex
	lost chan struct{} // closed when a watched connection drops
}

// NewPublisher returns a Publisher that publishes through js.
func NewPublisher(js jetstream.JetStream, cfg PublisherConfig) (*Publisher, error) {
	if err := cfg.setDefaults(js); err != nil {
		return nil, err
	}
	p := &Publisher{js: js, cfg: cfg, slots: make(chan struct{}, cfg.MaxConcurrentBatches)}
	if cfg.MeasureBatch {
		p.costs = newPublishCosts()
	}
	return p, nil
}

// Publish publishes env on subject and waits for JetStream to store it. The
// message carries Nats-Msg-Id = env.ID, so publishing the same envelope again
// within the stream's duplicate window stores nothing and returns an ack with
// Duplicate set.
func (p *Publisher) Publish(ctx context.Context, subject string, env Envelope) (*jetstream.PubAck, error) {
	m, err := NewMsg(ctx, subject, env)
	if err != nil {
		return nil, err
	}
	return p.PublishMsg(ctx, m)
}

// PublishMsg publishes one message and waits for JetStream to store it.
func (p *Publisher) PublishMsg(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
	ctx, cancel := p.bound(ctx)
	defer cancel()
	return PublishMsg(ctx, p.js, m)
}

// PublishMsg publishes one message through js and waits for JetStream to
// store it: a Publisher's single mode, for code that holds only a
// JetStream context and publishes one message at a time. A message without
// a traceparent gets the one of ctx's span.
func PublishMsg(ctx context.Context, js jetstream.JetStream, m *nats.Msg) (*jetstream.PubAck, error) {
	setTraceparent(ctx, m)
	ack, err := js.PublishMsg(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("bus: publish %s: %w", m.Subject, err)
	}
	return ack, nil
}

// PublishMsgs publishes msgs in order and returns nil once JetStream stored
// every one of them. Consecutive messages for the same stream go out as one
// atomic batch (from MinBatch up to MaxBatch messages, or as MeasureBatch
// chooses): the server stores all of them or none, with one fsync for the
// whole batch instead of one per message. Shorter runs are pipelined: sent
// at once, their acks read after.
//
// PublishMsgs never leaves a gap: when it fails, what is stored of msgs is a
// prefix, so a caller can find where it stopped from the last stored
// message. A batch the server refuses stores nothing and is published again
// message by message; that covers a stream without allow_atomic and, above
// all, a resend: a batch holding a message already stored is refused as a
// whole, while single publishes drop just the duplicates by their
// Nats-Msg-Id. Publishing the same messages again is safe when each carries
// Nats-Msg-Id. A message without a traceparent gets the one of ctx's span.
func (p *Publisher) PublishMsgs(ctx context.Context, msgs []*nats.Msg) error {
	for _, m := range msgs {
		setTraceparent(ctx, m)
	}
	ctx, cancel := p.bound(ctx)
	defer cancel()
	for start := 0; start < len(msgs); {
		stream := p.cfg.Definitions.StreamFor(msgs[start].Subject)
		end := start + 1
		for end < len(msgs) && end-start < p.cfg.MaxBatch && p.cfg.Definitions.StreamFor(msgs[end].Subject) == stream {
			end++
		}
		if err := p.publishRun(ctx, stream, msgs[start:end]); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// publishRun publishes messages that all belong to stream ("" when no
// definition captures their subject).
func (p *Publisher) publishRun(ctx context.Context, stream string, run []*nats.Msg) error {
	start := time.Now()
	if !p.asBatch(stream, len(run)) {
		err := p.publishPipelined(ctx, run)
		if err == nil && p.costs != nil {
			p.costs.observe(len(run), false, time.Since(start))
		}
		return err
	}
	err := p.publishBatch(ctx, run)
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		// The server answered and stored nothing: publish one by one.
		p.cfg.Logger.Debug("batch refused, publishing one by one", "stream", stream, "messages", len(run), "err", err)
		return p.publishPipelined(ctx, run)
	}
	if err == nil && p.costs != nil {
		p.costs.observe(len(run), true, time.Since(start))
	}
	return err
}

// asBatch reports whether n messages for stream go out as one atomic batch.
func (p *Publisher) asBatch(stream string, n int) bool {
	switch {
	case stream == "" || p.cfg.DisableBatch || n < 2:
		return false
	case p.costs != nil:
		return p.costs.asBatch(n)
	default:
		return n >= p.cfg.MinBatch
	}
}

// publishPipelined sends run with at most MaxInFlight acks outstanding and
// reads the acks in order. On one connection the server receives the
// messages in order; a message it refuses while later ones are stored would
// leave a gap, so from the first refusal on the messages are sent again one
// at a time, each after the previous one's ack, and those already stored
// are dropped as duplicates. That stops at the first failure.
func (p *Publisher) publishPipelined(ctx context.Context, run []*nats.Msg) error {
	type sent struct {
		i int
		f jetstream.PubAckFuture
	}
	pending := make([]sent, 0, min(len(run), p.cfg.MaxInFlight))
	// wait reads one ack: refused reports a refusal, err a failure to
	// learn the outcome.
	wait := func(s sent) (refused bool, err error) {
		timer := time.NewTimer(p.cfg.Timeout)
		defer timer.Stop()
		select {
		case <-s.f.Ok():
			return false, nil
		case <-s.f.Err():
			return true, nil
		case <-ctx.Done():
			return false, fmt.Errorf("bus: publish %s: %w", s.f.Msg().Subject, ctx.Err())
		case <-timer.C:
			return false, fmt.Errorf("bus: publish %s: %w", s.f.Msg().Subject, jetstream.ErrAsyncPublishTimeout)
		}
	}
	next := 0
	for ; next < len(run); next++ {
		if len(pending) == p.cfg.MaxInFlight {
			refused, err := wait(pending[0])
			if err != nil {
				return err
			}
			if refused {
				return p.publishInTurn(ctx, run[pending[0].i:])
			}
			pending = pending[1:]
		}
		m := run[next]
		// The client sets its own reply subject, so it gets a copy.
		f, err := p.js.PublishMsgAsync(&nats.Msg{Subject: m.Subject, Header: maps.Clone(m.Header), Data: m.Data})
		if err != nil {
			break
		}
		pending = append(pending, sent{next, f})
	}
	for _, s := range pending {
		refused, err := wait(s)
		if err != nil {
			return err
		}
		if refused {
			return p.publishInTurn(ctx, run[s.i:])
		}
	}
	return p.publishInTurn(ctx, run[next:])
}

// publishInTurn publishes msgs one at a time, each after the previous one's
// ack.
func (p *Publisher) publishInTurn(ctx context.Context, msgs []*nats.Msg) error {
	for _, m := range msgs {
		pctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
		_, err := p.js.PublishMsg(pctx, m)
		cancel()
		if err != nil {
			return fmt.Errorf("bus: publish %s: %w", m.Subject, err)
		}
	}
	return nil
}

// Watch makes publishes in flight fail as soon as the connection drops: an
// answer sent to a dropped connection never arrives, and waiting for the
// timeout would only delay the caller's retry. It returns a function that
// stops watching.
func (p *Publisher) Watch() (stop func()) {
	nc := p.js.Conn()
	p.mu.Lock()
	p.lost = make(chan struct{})
	p.mu.Unlock()
	ch := nc.StatusChanged(nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-ch:
				p.mu.Lock()
				if p.lost != nil {
					close(p.lost)
					p.lost = make(chan struct{})
				}
				p.mu.Unlock()
			}
		}
	}()
	return func() {
		nc.RemoveStatusListener(ch)
		close(done)
		p.mu.Lock()
		p.lost = nil
		p.mu.Unlock()
	}
}

// bound returns ctx, cancelled as well when a watched connection drops.
func (p *Publisher) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	p.mu.Lock()
	lost := p.lost
	p.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	if lost != nil {
		go func() {
			select {
			case <-lost:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	return ctx, cancel
}
