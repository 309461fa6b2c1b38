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
// activity rows of everything handed to it while the previous insert was
// under way go into Postgres in one statement, and the feed items of
// everything handed to it while the previous publish was under way onto
// AGENTS_EVENTS in one publish (an atomic batch), so that a burst of raw
// events pays one commit and one fsync for all of them instead of one each.
// Each handler waits for both writes holding its item before it returns,
// so a raw event is acked only once both are stored.
//
// The two go on side by side: the feed does not wait for Postgres, neither
// for this item's row nor for the rows before it, so a slow insert does
// not hold up the live feed. A live client's position is the feed item's
// sequence in AGENTS_EVENTS, which the row plays no part in, and both are
// keyed by the raw event, so a write that fails halfway (or a crash) is
// repeated by the redelivery without doubling either: the row by its
// source sequence, the feed item by its Nats-Msg-Id.
//
// Order: one session's raw events are handed in by one lane at a time, in
// order, and wait for their writes; publishes happen one after the other
// and keep the order items came in, so a session's items reach the feed
// in the order of its raw events.
type recorder struct {
	pool *pgxpool.Pool
	// pub publishes the feed items; nil records rows only.
	pub *bus.Publisher
	// in is nil until start: then each record call writes on its own.
	// What one call hands in is published together, then inserted
	// together (rows).
	in   chan []*pending
	rows chan []*pending
	// stopped is closed when the loops return.
	stopped chan struct{}
	// max is the most items one write takes.
	max int
	// timeout bounds one write.
	timeout time.Duration
	// writes counts the inserts made, publishes the publishes.
	writes, publishes atomic.Int64
}

// pending is one raw event's share of the writes: its activity row, its
// feed item, or both.
type pending struct {
	row  *postgres.ActivityRow
	msg  *nats.Msg
	done chan error

	// left counts the parts (row, feed item) not written yet; err joins
	// their failures.
	left atomic.Int32
	mu   sync.Mutex
	err  error
}

// prepare readies p for the writes.
func (p *pending) prepare() {
	p.done = make(chan error, 1)
	n := int32(0)
	if p.row != nil {
		n++
	}
	if p.msg != nil {
		n++
	}
	p.left.Store(n)
	if n == 0 {
		p.done <- nil
	}
}

// finish records the outcome of one part; the last one answers done.
func (p *pending) finish(err error) {
	if err != nil {
		p.mu.Lock()
		p.err = errors.Join(p.err, err)
		p.mu.Unlock()
	}
	if p.left.Add(-1) == 0 {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.done <- p.err
	}
}

func newRecorder(pool *pgxpool.Pool) *recorder {
	return &recorder{pool: pool, max: 1000, timeout: 30 * time.Second}
}

// start makes record calls share writes from now until ctx ends. One
// publish and one insert are under way at a time: what arrives meanwhile
// waits for the next one, which takes all of it, so the busier the ACL
// the larger its writes.
func (r *recorder) start(ctx context.Context, pub *bus.Publisher) {
	r.pub = pub
	r.in = make(chan []*pending, r.max)
	r.rows = make(chan []*pending, r.max)
	r.stopped = make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { r.run(ctx, r.in, r.publishPart) })
	wg.Go(func() { r.run(ctx, r.rows, r.insert) })
	go func() {
		wg.Wait()
		close(r.stopped)
	}()
}

// record stores row and publishes msg (either may be nil) and returns once
// both are done.
func (r *recorder) record(ctx context.Context, row *postgres.ActivityRow, msg *nats.Msg) error {
	return r.recordAll(ctx, []*pending{{row: row, msg: msg}})[0]
}

// recordAll writes ps, in order and in the same writes, and returns once
// all are done, with each one's outcome.
func (r *recorder) recordAll(ctx context.Context, ps []*pending) []error {
	errs := make([]error, len(ps))
	if r.in == nil {
		r.write(ctx, ps)
		for i, p := range ps {
			errs[i] = <-p.done
		}
		return errs
	}
	for _, p := range ps {
		p.prepare()
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

// run takes what is handed in on in, everything that is waiting at once,
// and writes it with write, until ctx ends.
func (r *recorder) run(ctx context.Context, in chan []*pending, write func(context.Context, [][]*pending)) {
	handed := make([][]*pending, 0, r.max)
	for {
		select {
		case ps := <-in:
			handed = append(handed[:0], ps)
		case <-ctx.Done():
			return
		}
		n := len(handed[0])
	more:
		for n < r.max {
			select {
			case ps := <-in:
				handed = append(handed, ps)
				n += len(ps)
			default:
				break more
			}
		}
		write(ctx, handed)
		clear(handed)
	}
}

// publishPart hands the rows of what was handed in to the insert loop,
// so that they are stored while the feed items are published, then
// publishes those.
func (r *recorder) publishPart(ctx context.Context, handed [][]*pending) {
	var batch []*pending
	for _, ps := range handed {
		select {
		case r.rows <- ps:
		case <-ctx.Done():
			return
		}
		batch = append(batch, ps...)
	}
	r.publish(ctx, batch)
}

// insert stores the rows of what was handed in, in one statement.
func (r *recorder) insert(ctx context.Context, handed [][]*pending) {
	var batch []*pending
	for _, ps := range handed {
		batch = append(batch, ps...)
	}
	r.insertRows(ctx, batch)
}

// write stores the batch's rows in one statement while it publishes the
// batch's feed items, and answers every item with the outcome.
func (r *recorder) write(ctx context.Context, batch []*pending) {
	for _, p := range batch {
		p.prepare()
	}
	var wg sync.WaitGroup
	wg.Go(func() { r.insertRows(ctx, batch) })
	r.publish(ctx, batch)
	wg.Wait()
}

// insertRows stores the rows of batch in one statement. When that fails,
// each row is inserted again on its own, so that one row the database
// refuses fails alone; what the failed write stored already is kept once
// by its key.
func (r *recorder) insertRows(ctx context.Context, batch []*pending) {
	var ps []*pending
	var rows []postgres.ActivityRow
	for _, p := range batch {
		if p.row != nil {
			ps, rows = append(ps, p), append(rows, *p.row)
		}
	}
	if len(rows) == 0 {
		return
	}
	r.writes.Add(1)
	wctx, cancel := context.WithTimeout(ctx, r.timeout)
	err := postgres.InsertActivityItems(wctx, r.pool, rows)
	cancel()
	if err != nil && len(rows) > 1 {
		for _, p := range ps {
			r.insertRows(ctx, []*pending{p})
		}
		return
	}
	if err != nil {
		err = fmt.Errorf("acl: record activity item: %w", err)
	}
	for _, p := range ps {
		p.finish(err)
	}
}

// publish publishes the feed items of batch in order. When that fails,
// each is published again on its own, so that one item the server refuses
// (one above its payload limit, say) fails alone and the others go on;
// what the failed publish stored already is kept once by its Nats-Msg-Id.
func (r *recorder) publish(ctx context.Context, batch []*pending) {
	var ps []*pending
	var msgs []*nats.Msg
	for _, p := range batch {
		if p.msg != nil {
			ps, msgs = append(ps, p), append(msgs, p.msg)
		}
	}
	if len(msgs) == 0 {
		return
	}
	var err error
	if r.pub != nil {
		r.publishes.Add(1)
		wctx, cancel := context.WithTimeout(ctx, r.timeout)
		err = r.pub.PublishMsgs(wctx, msgs)
		cancel()
	}
	if err != nil && len(msgs) > 1 {
		for _, p := range ps {
			r.publish(ctx, []*pending{p})
		}
		return
	}
	if err != nil {
		err = fmt.Errorf("acl: publish feed item: %w", err)
	}
	for _, p := range ps {
		p.finish(err)
	}
}
