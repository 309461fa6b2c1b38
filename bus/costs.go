package bus

import (
	"sync"
	"time"
)

// publishCosts learns what publishing costs, to send each run the cheaper
// way (PublisherConfig.MeasureBatch). JetStream fsyncs every message it
// stores before the ack, one after the other, so n messages published one
// by one take about n fsyncs; an atomic batch takes one fsync for its
// messages but a fixed few more to stage the batch. Both vary with the disk
// and its load (a batch costs from about five to over twenty single
// publishes on the same machine), so the publisher measures them as it goes
// rather than trusting a constant: a run goes out as one batch when that is
// expected to be done sooner than its messages one by one.
//
// Lone messages keep the cost of a single publish current, and runs under
// load keep the batch's current; a stale guess either way corrects itself,
// since the way it favours is then measured.
type publishCosts struct {
	mu     sync.Mutex
	single time.Duration // per message published on its own
	batch  time.Duration // per atomic batch
}

// Starting guesses, replaced by what the publisher measures within its
// first runs.
const (
	guessSingle = 2 * time.Millisecond
	guessBatch  = 10 * time.Millisecond
)

func newPublishCosts() *publishCosts {
	return &publishCosts{single: guessSingle, batch: guessBatch}
}

// asBatch reports whether n messages go out as one atomic batch.
func (c *publishCosts) asBatch(n int) bool {
	if n < 2 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Duration(n)*c.single >= c.batch
}

// learnBatchBelow bounds the batches that teach the fixed cost of a batch.
// Past a few dozen messages a batch's time grows with its size (the server
// writes every message twice, to stage and to store it); the choice is made
// well below that, where a batch's cost is its fixed part.
const learnBatchBelow = 64

// observe records that publishing n messages took d, as one batch or one
// by one. The averages weigh the latest measure by an eighth: a passing
// stall does not swing the choice, a lasting change does within a few runs.
func (c *publishCosts) observe(n int, batch bool, d time.Duration) {
	if n <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if batch {
		if n < learnBatchBelow {
			c.batch += (d - c.batch) / 8
		}
	} else {
		c.single += (d/time.Duration(n) - c.single) / 8
	}
}
