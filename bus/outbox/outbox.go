// Package outbox forwards the events that aggregates write to their
// transactional outbox onto JetStream. It knows the outbox only through
// Source and JetStream only through a bus.Publisher, as watermill's
// forwarder does.
//
// Events take two ways out. The worker that committed them forwards them at
// once (Forward), and the Forwarder's sweep (Run) publishes whatever is
// still in the outbox: the events of a writer that died between its commit
// and its publish, or whose publish failed. Each event carries its id as
// Nats-Msg-Id, so an event published both ways is stored once.
//
// The rows of forwarded events are forgotten a little later and together:
// one delete for the events of every command forwarded in the meantime
// instead of a transaction of its own for each. A row whose delete was lost
// (a crash in between) is only published again by the sweep, and JetStream
// drops it as a duplicate.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
)

// Message is one committed event waiting in the outbox.
type Message struct {
	// ID is the event id; it becomes the Nats-Msg-Id.
	ID uuid.UUID
	// Subject is agents.evt.<aggregate>.<aggregateId>.<event>.
	Subject string
	// Type is the event's snake_case name, sent as the Agents-Type header.
	Type string
	// Payload is the JSON envelope published as the message body.
	Payload []byte
}

// Source is the outbox as the forwarder needs it.
type Source interface {
	// TryLead makes this copy the one that sweeps, if no other copy is; ok
	// reports whether it is.
	TryLead(ctx context.Context) (lease Lease, ok bool, err error)
	// Committed returns up to limit committed messages. For each
	// aggregate they are in commit order, and a message is returned only
	// with every earlier message of its aggregate still in the outbox.
	Committed(ctx context.Context, limit int) ([]Message, error)
	// Forget removes published messages.
	Forget(ctx context.Context, ids []uuid.UUID) error
}

// Lease is held by the one copy that sweeps.
type Lease interface {
	// Wait returns when a writer announced a commit, or when ctx ends.
	Wait(ctx context.Context) error
	// Release gives the lease up.
	Release()
}

// Forwarder publishes outbox messages and forgets them once stored.
type Forwarder struct {
	// Source is the outbox. Required.
	Source Source
	// Publisher publishes each round in order: a run of messages goes out
	// as one atomic batch, stored with one fsync. Required.
	Publisher *bus.Publisher
	// BatchSize is how many messages one sweep round reads and publishes
	// at most (default 1000, one atomic batch of the default Publisher).
	BatchSize int
	// PollInterval is how often the outbox is swept when no writer
	// announces a commit (default 1s).
	PollInterval time.Duration
	// Log receives progress and errors (default slog.Default()).
	Log *slog.Logger
	// Along, when set, returns the messages that Forward sends along with
	// an event, at the same time as the events: what a reaction would send
	// for the event, under an id derived from it, sent without waiting for
	// the event to be stored and handed to the reaction. The reaction sends
	// it again when the event reaches it, which JetStream drops as a
	// duplicate, so these messages need no outbox row and the sweep does
	// not send them.
	Along func(ctx context.Context, event Message) []*nats.Msg
	// ForgetDelay is how long the row of a forwarded event may wait to
	// be deleted, so that the rows of the events forwarded meanwhile go
	// in the same delete (default 10ms).
	ForgetDelay time.Duration

	// pending holds the ids of forwarded events whose rows are still to
	// be deleted; forgetting is set while a goroutine deletes them.
	pendingMu  sync.Mutex
	pending    []uuid.UUID
	forgetting bool
	// deleting serialises the deletes of pending rows, so that a sweep
	// that forgets them first never reads rows being deleted.
	deleting sync.Mutex
}

// New returns a Forwarder of source that publishes through js with a
// bus.Publisher of default settings.
func New(source Source, js jetstream.JetStream) (*Forwarder, error) {
	pub, err := bus.NewPublisher(js, bus.PublisherConfig{})
	if err != nil {
		return nil, err
	}
	return &Forwarder{Source: source, Publisher: pub}, nil
}

func (f *Forwarder) batchSize() int {
	if f.BatchSize <= 0 {
		return 1000
	}
	return f.BatchSize
}

func (f *Forwarder) pollInterval() time.Duration {
	if f.PollInterval <= 0 {
		return time.Second
	}
	return f.PollInterval
}

func (f *Forwarder) forgetDelay() time.Duration {
	if f.ForgetDelay <= 0 {
		return 10 * time.Millisecond
	}
	return f.ForgetDelay
}

func (f *Forwarder) log() *slog.Logger {
	if f.Log == nil {
		return slog.Default().With("component", "outbox")
	}
	return f.Log
}

// Forward publishes msgs, committed by the caller, in order, and once
// JetStream stored every one, leaves their rows to be forgotten with those
// of the other events forwarded within ForgetDelay. On an error they stay
// in the outbox for the sweep.
func (f *Forwarder) Forward(ctx context.Context, msgs []Message) error {
	if len(msgs) == 0 {
		return nil
	}
	var along []*nats.Msg
	if f.Along != nil {
		for _, m := range msgs {
			along = append(along, f.Along(ctx, m)...)
		}
	}
	sentAlong := make(chan error, 1)
	if len(along) > 0 {
		go func() { sentAlong <- f.Publisher.PublishMsgs(ctx, along) }()
	} else {
		sentAlong <- nil
	}
	err := f.Publisher.PublishMsgs(ctx, natsMsgs(msgs))
	if alongErr := <-sentAlong; alongErr != nil {
		// The reaction sends them anyway once the event reaches it.
		f.log().Warn("messages along the events not sent", "error", alongErr)
	}
	if err != nil {
		return fmt.Errorf("outbox: forward: %w", err)
	}
	f.forgetLater(msgs)
	return nil
}

// forgetLater adds the ids of msgs to the pending rows, and starts the
// goroutine that deletes them unless one runs.
func (f *Forwarder) forgetLater(msgs []Message) {
	f.pendingMu.Lock()
	for _, m := range msgs {
		f.pending = append(f.pending, m.ID)
	}
	start := !f.forgetting
	f.forgetting = true
	f.pendingMu.Unlock()
	if start {
		go f.forgetPending()
	}
}

// forgetPending deletes the pending rows every ForgetDelay until none are
// left. A failed delete is logged and not retried: the sweep publishes
// those rows again, which JetStream drops, and forgets them.
func (f *Forwarder) forgetPending() {
	for {
		time.Sleep(f.forgetDelay())
		f.deleting.Lock()
		f.pendingMu.Lock()
		ids := f.pending
		f.pending = nil
		if len(ids) == 0 {
			f.forgetting = false
		}
		f.pendingMu.Unlock()
		if len(ids) == 0 {
			f.deleting.Unlock()
			return
		}
		// Not the caller's context: the rows are the forwarder's to
		// forget, whether or not the command that wrote them is still
		// being handled.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := f.forgetIDs(ctx, ids)
		cancel()
		f.deleting.Unlock()
		if err != nil {
			f.log().Warn("forwarded events not forgotten; the sweep publishes them again", "error", err)
		}
	}
}

// forgetForwarded deletes the pending rows now.
func (f *Forwarder) forgetForwarded(ctx context.Context) error {
	f.deleting.Lock()
	defer f.deleting.Unlock()
	f.pendingMu.Lock()
	ids := f.pending
	f.pending = nil
	f.pendingMu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	if err := f.forgetIDs(ctx, ids); err != nil {
		// Back for the next try: the rows are published.
		f.pendingMu.Lock()
		f.pending = append(ids, f.pending...)
		f.pendingMu.Unlock()
		return err
	}
	return nil
}

// Sweep publishes one round of committed messages and forgets them once
// JetStream stored every one. It returns how many it published. The rows
// of events this Forwarder forwarded are forgotten first, so that the
// sweep does not publish them again.
func (f *Forwarder) Sweep(ctx context.Context) (int, error) {
	if err := f.forgetForwarded(ctx); err != nil {
		return 0, err
	}
	msgs, err := f.Source.Committed(ctx, f.batchSize())
	if err != nil || len(msgs) == 0 {
		return 0, err
	}
	// On a failure nothing is forgotten and the whole round is published
	// again, which the Nats-Msg-Id makes harmless.
	if err := f.Publisher.PublishMsgs(ctx, natsMsgs(msgs)); err != nil {
		return 0, fmt.Errorf("outbox: publish: %w", err)
	}
	if err := f.forget(ctx, msgs); err != nil {
		return 0, err
	}
	return len(msgs), nil
}

func (f *Forwarder) forget(ctx context.Context, msgs []Message) error {
	ids := make([]uuid.UUID, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return f.forgetIDs(ctx, ids)
}

// forgetIDs deletes the rows of ids, a batch at a time.
func (f *Forwarder) forgetIDs(ctx context.Context, ids []uuid.UUID) error {
	for len(ids) > 0 {
		n := min(len(ids), f.batchSize())
		if err := f.Source.Forget(ctx, ids[:n]); err != nil {
			return fmt.Errorf("outbox: forget: %w", err)
		}
		ids = ids[n:]
	}
	return nil
}

// Run sweeps until ctx ends. Several copies may run: one holds the lease
// and sweeps, the others wait to take over. The one sweeping copy publishes
// the next round only once the previous one is stored, which keeps each
// aggregate's events in commit order. Errors are logged and retried.
func (f *Forwarder) Run(ctx context.Context) error {
	log := f.log()
	for ctx.Err() == nil {
		err := f.lead(ctx, log)
		if err != nil && ctx.Err() == nil {
			log.Warn("outbox forwarder restarting", "error", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(f.pollInterval()):
		}
	}
	return nil
}

// lead waits to hold the lease, then sweeps until an error.
func (f *Forwarder) lead(ctx context.Context, log *slog.Logger) error {
	var lease Lease
	for {
		l, ok, err := f.Source.TryLead(ctx)
		if err != nil {
			return err
		}
		if ok {
			lease = l
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(f.pollInterval()):
		}
	}
	defer lease.Release()
	log.Info("outbox forwarder leading")
	for {
		for {
			n, err := f.Sweep(ctx)
			if err != nil {
				return err
			}
			if n < f.batchSize() {
				break
			}
		}
		wait, cancel := context.WithTimeout(ctx, f.pollInterval())
		err := lease.Wait(wait)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
	}
}

func natsMsgs(msgs []Message) []*nats.Msg {
	out := make([]*nats.Msg, len(msgs))
	for i, m := range msgs {
		out[i] = &nats.Msg{Subject: m.Subject, Data: m.Payload, Header: nats.Header{
			jetstream.MsgIDHeader: []string{m.ID.String()},
			"Agents-Type":         []string{m.Type},
		}}
	}
	return out
}
