package bus

import (
	"context"
	"hash/fnv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// lane holds the fetched messages of its keys, in the order they arrived,
// until its worker takes them. It never refuses a message: the fetching
// must not stop at one busy key, or the messages fetched behind it would
// sit unseen in the subscription while their ack wait runs out. The
// consumer's max_ack_pending bounds what all lanes hold together.
type lane struct {
	mu     sync.Mutex
	queue  []jetstream.Msg
	closed bool
	// ready holds a token when the queue may have changed.
	ready chan struct{}
}

func newLane() *lane { return &lane{ready: make(chan struct{}, 1)} }

func (l *lane) push(m jetstream.Msg) {
	l.mu.Lock()
	l.queue = append(l.queue, m)
	l.mu.Unlock()
	l.wake()
}

func (l *lane) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.wake()
}

func (l *lane) wake() {
	select {
	case l.ready <- struct{}{}:
	default:
	}
}

// take waits for messages and removes up to n of the oldest; false once
// the lane is closed and empty.
func (l *lane) take(n int) ([]jetstream.Msg, bool) {
	for {
		l.mu.Lock()
		if len(l.queue) > 0 {
			k := min(n, len(l.queue))
			out := make([]jetstream.Msg, k)
			copy(out, l.queue)
			// Shift instead of reslicing, so the backing array does not
			// keep handled messages alive.
			rest := copy(l.queue, l.queue[k:])
			clear(l.queue[rest:])
			l.queue = l.queue[:rest]
			l.mu.Unlock()
			return out, true
		}
		closed := l.closed
		l.mu.Unlock()
		if closed {
			return nil, false
		}
		<-l.ready
	}
}

// waiting is a copy of the messages in the lane.
func (l *lane) waiting() []jetstream.Msg {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]jetstream.Msg(nil), l.queue...)
}

// laneOf is the lane of m's key: a key always maps to the same lane.
func (r *runner) laneOf(m jetstream.Msg) *lane {
	h := fnv.New32a()
	h.Write([]byte(r.cfg.OrderKey(m)))
	return r.lanes[h.Sum32()%uint32(len(r.lanes))]
}

// startLanes starts a worker per lane, and the keeper that holds the
// waiting messages on the server.
func (r *runner) startLanes(ctx, base context.Context, wg *sync.WaitGroup) {
	r.lanes = make([]*lane, r.cfg.Concurrency)
	for i := range r.lanes {
		l := newLane()
		r.lanes[i] = l
		wg.Go(func() { r.work(ctx, base, l) })
	}
	wg.Go(func() { r.keepWaiting(ctx) })
}

// closeLanes lets the workers finish once their lanes are empty.
func (r *runner) closeLanes() {
	for _, l := range r.lanes {
		l.close()
	}
}

// work handles the messages of a lane one at a time, or with a batch
// handler everything waiting up to LaneBuffer+1 at once. Once the run
// ends, what waits is handed back instead, like the fetched messages no
// lane took.
func (r *runner) work(ctx, base context.Context, l *lane) {
	n := 1
	if r.cfg.BatchHandler != nil {
		n = max(r.cfg.LaneBuffer, 0) + 1
	}
	for {
		msgs, ok := l.take(n)
		if !ok {
			return
		}
		switch {
		case ctx.Err() != nil:
			for _, m := range msgs {
				r.nakNow(m)
			}
		case r.cfg.BatchHandler == nil:
			r.handle(base, msgs[0])
		default:
			r.handleBatch(base, msgs)
		}
	}
}

// keepWaiting tells the server, three times per shortest ack deadline,
// that the messages waiting in the lanes are being worked on, until ctx
// ends. Without it a message that waits behind its key's busy handler
// longer than its ack wait is handed out again: to this process, which
// then handles it twice, or, with a consumer backoff, after a deadline of
// up to its longest value. Once a handler starts, it reports progress
// itself.
func (r *runner) keepWaiting(ctx context.Context) {
	for {
		wait := time.NewTimer(r.keepAliveEvery())
		select {
		case <-ctx.Done():
			wait.Stop()
			return
		case <-wait.C:
		}
		for _, l := range r.lanes {
			r.reportProgress(l.waiting())
		}
	}
}

// keepAliveEvery is a third of the shortest ack deadline a delivery of the
// consumer can have, which leaves room for one report to be late.
func (r *runner) keepAliveEvery() time.Duration {
	shortest := r.cfg.AckWait
	if p := r.policy.Load(); p != nil {
		shortest = p.ackWait
		for _, d := range p.serverBackoff {
			shortest = min(shortest, d)
		}
	}
	return max(shortest/3, 10*time.Millisecond)
}
