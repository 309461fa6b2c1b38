package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
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
	// Logger receives the fallbacks from batches to single publishes; nil
	// means slog.Default().
	Logger *slog.Logger
}

func (c *PublisherConfig) setDefaults() error {
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

// Publisher publishes envelopes and message batches to JetStream. It is safe
// for concurrent use.
type Publisher struct {
	js    jetstream.JetStream
	cfg   PublisherConfig
	slots chan struct{}
}

// NewPublisher returns a Publisher that publishes through js.
func NewPublisher(js jetstream.JetStream, cfg PublisherConfig) (*Publisher, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	return &Publisher{js: js, cfg: cfg, slots: make(chan struct{}, cfg.MaxConcurrentBatches)}, nil
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
	ack, err := p.js.PublishMsg(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("bus: publish %s %s: %w", subject, env.ID, err)
	}
	return ack, nil
}

// PublishMsgs publishes msgs in order and returns nil once JetStream stored
// every one of them. Consecutive messages for the same stream go out as one
// atomic batch (from MinBatch up to MaxBatch messages): the server stores all
// of them or none, with one fsync for the whole batch instead of one per
// message. Shorter runs are published asynchronously, one by one.
//
// A batch the server refuses is published again message by message, with a
// bounded number of asynchronous publishes in flight. That covers a stream
// without allow_atomic and, above all, a resend: a batch holding a message
// already stored is refused as a whole, while single publishes drop just the
// duplicates by their Nats-Msg-Id. On an error some messages may be stored;
// publishing the same messages again is safe when each carries Nats-Msg-Id.
func (p *Publisher) PublishMsgs(ctx context.Context, msgs []*nats.Msg) error {
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
	if stream == "" || len(run) < max(p.cfg.MinBatch, 2) || p.cfg.DisableBatch {
		return p.publishAsync(ctx, run)
	}
	err := p.publishBatch(ctx, run)
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		// The server answered and stored nothing: publish one by one.
		p.cfg.Logger.Debug("batch refused, publishing one by one", "stream", stream, "messages", len(run), "err", err)
		return p.publishAsync(ctx, run)
	}
	return err
}

// publishAsync publishes run with at most MaxInFlight acks outstanding and
// waits for all of them.
func (p *Publisher) publishAsync(ctx context.Context, run []*nats.Msg) error {
	timeout := p.js.Options().DefaultTimeout
	pending := make([]jetstream.PubAckFuture, 0, min(len(run), p.cfg.MaxInFlight))
	wait := func(f jetstream.PubAckFuture) error {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		select {
		case <-f.Ok():
			return nil
		case err := <-f.Err():
			return fmt.Errorf("bus: publish %s: %w", f.Msg().Subject, err)
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return fmt.Errorf("bus: publish %s: %w", f.Msg().Subject, jetstream.ErrAsyncPublishTimeout)
		}
	}
	for _, m := range run {
		if len(pending) == p.cfg.MaxInFlight {
			if err := wait(pending[0]); err != nil {
				return err
			}
			pending = pending[1:]
		}
		// The client sets its own reply subject, so it gets a copy.
		f, err := p.js.PublishMsgAsync(&nats.Msg{Subject: m.Subject, Header: maps.Clone(m.Header), Data: m.Data})
		if err != nil {
			return fmt.Errorf("bus: publish %s: %w", m.Subject, err)
		}
		pending = append(pending, f)
	}
	for _, f := range pending {
		if err := wait(f); err != nil {
			return err
		}
	}
	return nil
}
