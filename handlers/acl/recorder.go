package acl

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/postgres"
)

// recorder writes what the handlers record, many raw events at a time: the
// activity rows of everything handed to it while the previous write was
// under way go into Postgres in one statement, and their feed items onto
// AGENTS_EVENTS in one publish (an atomic batch or a pipelined run), so
// that a burst of raw events pays one commit and one fsync for all of them
// instead of one each. Each handler waits for the write holding its item
// before it returns, so a raw event is acked only once both are stored.
//
// Order: one session's raw events are handed in by one lane at a time, in
// order, and wait for their writes; writes happen one after the other and
// keep the order items came in, so a session's items reach the feed in
// the order of its raw events.
//
// The feed does not wait for Postgres: the row and the feed item are
// written at the same time. A live client's position is the feed item's
// sequence in AGENTS_EVENTS, which the row plays no part in, and both are
// keyed by the raw event, so a write that fails halfway (or a crash) is
// repeated by the redelivery without doubling either: the row by its
// source sequence, the feed item by its Nats-Msg-Id.
type recorder struct {
	pool *pgxpool.Pool
	// pub publishes the feed items; nil records rows only.
	pub *bus.Publisher
	// in is nil until start: then each record call writes on its own.
	// What one call hands in goes into one write.
	in chan []*pending
	// stopped is closed when run returns.
	stopped chan struct{}
	// max is the most items one write takes.
	max int
	// timeout bounds one write.
	timeout time.Duration
	// writes counts the writes made.
	writes atomic.Int64
}

// pending is one raw event's share of a write: its activity row, its feed
// item, or both.
type pending struct {
	row  *postgres.ActivityRow
	msg  *nats.Msg
	done chan error
}

func newRecorder(pool *pgxpool.Pool) *recorder {
	return &recorder{pool: pool, max: 1000, timeout: 30 * time.Second}
}

// start makes record calls share writes from now until ctx ends. One
// write is under way at a time: what arrives meanwhile waits for the next
// one, which takes all of it, so the busier the ACL the larger its writes.
func (r *recorder) start(ctx context.Context, pub *bus.Publisher) {
	r.pub = pub
	r.in = make(chan []*pending, r.max)
	r.stopped = make(chan struct{})
	go func() {
		defer close(r.stopped)
		r.run(ctx)
	}()
}

// record stores row and publishes msg (either may be nil) and returns once
// both are done.
func (r *recorder) record(ctx context.Context, row *postgres.ActivityRow, msg *nats.Msg) error {
	return r.recordAll(ctx, []*pending{{row: row, msg: msg}})[0]
}

// recordAll writes ps, in order and in the same write, and returns once
// all are done, with each one's outcome.
func (r *recorder) recordAll(ctx context.Context, ps []*pending) []error {
	errs := make([]error, len(ps))
	for _, p := range ps {
		p.done = make(chan error, 1)
	}
	if r.in == nil {
		r.write(ctx, ps)
		for i, p := range ps {
			errs[i] = <-p.done
		}
		return errs
	}
	select {
	case r.in <- ps:
	case <-ctx.Done():
		return fill(errs, ctx.Err())
	case <-r.stopped:
		return fill(errs, errRecorderStopped)
	}
	for i, p := range ps {
		select {
		case errs[i] = <-p.done:
		case <-ctx.Done():
			// The write goes on; the redelivered raw event finds it done.
			errs[i] = ctx.Err()
		case <-r.stopped:
			// Left unwritten, or written: the redelivery sees to either.
			errs[i] = errRecorderStopped
		}
	}
	return errs
}

var errRecorderStopped = errors.New("acl: recorder stopped")

func fill(errs []error, err error) []error {
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// run takes what is handed in, everything that is waiting at once, and
// writes it, until ctx ends.
func (r *recorder) run(ctx context.Context) {
	batch := make([]*pending, 0, r.max)
	for {
		select {
		case ps := <-r.in:
			batch = append(batch[:0], ps...)
		case <-ctx.Done():
			return
		}
	more:
		for len(batch) < r.max {
			select {
			case ps := <-r.in:
				batch = append(batch, ps...)
			default:
				break more
			}
		}
		r.write(ctx, batch)
		clear(batch)
	}
}

// write stores the batch's rows in one statement while it publishes the
// batch's feed items, and answers every item with the outcome. When that
// fails, each item is written again on its own, so that one item the
// database or the server refuses (a feed item above the server's payload
// limit, say) fails alone and the others go on; what the failed write
// stored already is kept once by its key.
func (r *recorder) write(ctx context.Context, batch []*pending) {
	err := r.writeAll(ctx, batch)
	if err != nil && len(batch) > 1 {
		for _, p := range batch {
			r.write(ctx, []*pending{p})
		}
		return
	}
	for _, p := range batch {
		p.done <- err
	}
}

func (r *recorder) writeAll(ctx context.Context, batch []*pending) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	r.writes.Add(1)
	rows := make([]postgres.ActivityRow, 0, len(batch))
	msgs := make([]*nats.Msg, 0, len(batch))
	for _, p := range batch {
		if p.row != nil {
			rows = append(rows, *p.row)
		}
		if p.msg != nil {
			msgs = append(msgs, p.msg)
		}
	}
	var dbErr, pubErr error
	var wg sync.WaitGroup
	if len(rows) > 0 {
		wg.Go(func() {
			if err := postgres.InsertActivityItems(ctx, r.pool, rows); err != nil {
				dbErr = fmt.Errorf("acl: record %d activity items: %w", len(rows), err)
			}
		})
	}
	if len(msgs) > 0 && r.pub != nil {
		if err := r.pub.PublishMsgs(ctx, msgs); err != nil {
			pubErr = fmt.Errorf("acl: publish %d feed items: %w", len(msgs), err)
		}
	}
	wg.Wait()
	return errors.Join(dbErr, pubErr)
}
