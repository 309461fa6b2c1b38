package relay

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
)

// claimJob is a lease to take: the session and its record.
type claimJob struct {
	id string
	v  *recView
	// Set by the update.
	rec SessionRecord
	rev uint64
	err error
}

// claimConcurrency bounds the lease updates in flight at once when they go
// one by one: each waits for JetStream to store it.
const claimConcurrency = 32

// claimBatch is the most leases updated in one atomic batch. A batch
// holding a lease that another relay took in the meantime is refused whole
// and updated one by one, so batches stay short enough that a race costs
// little.
const claimBatch = 500

// claimAll takes the leases of jobs.
func (c *coordinator) claimAll(ctx context.Context, jobs []claimJob) {
	if len(jobs) == 0 || !c.r.leaseValid() {
		return
	}
	owner := c.owner()
	for i := range jobs {
		jobs[i].rec = SessionRecord{State: jobs[i].v.rec.State, Owner: owner}
	}
	c.updateAll(ctx, jobs)
	for i := range jobs {
		j := &jobs[i]
		if j.err != nil {
			if !errors.Is(j.err, jetstream.ErrKeyRevisionMismatch) && ctx.Err() == nil {
				c.r.log.Warn("taking lease failed", "session_id", j.id, "err", j.err)
			}
			continue
		}
		if j.v.rec.Owner != "" {
			c.r.log.Info("lease taken over", "session_id", j.id, "from", j.v.rec.Owner)
		} else {
			c.r.log.Info("lease taken", "session_id", j.id)
		}
		j.v.rec, j.v.rev = j.rec, j.rev
		delete(c.orphaned, j.id)
		c.hold(j.id, j.rec.State == StateDraining)
	}
}

// updateAll writes the record j.rec of every job, each a revision-checked
// update from j.v.rev, and sets j.rev or j.err. JetStream writes each update
// to disk before it answers, so many at once go as atomic batches (one
// fsync for the batch), each update still checked against the revision
// this relay saw (Nats-Expected-Last-Subject-Sequence). A batch the server
// refuses stores nothing, and its updates are then made one by one, as they
// are where the bucket does not take batches.
func (c *coordinator) updateAll(ctx context.Context, jobs []claimJob) {
	var single []*claimJob
	for start := 0; start < len(jobs); start += claimBatch {
		chunk := jobs[start:min(start+claimBatch, len(jobs))]
		if len(chunk) > 1 && c.updateBatch(ctx, chunk) {
			continue
		}
		for i := range chunk {
			single = append(single, &chunk[i])
		}
	}
	g := errgroup.Group{}
	g.SetLimit(claimConcurrency)
	for _, j := range single {
		g.Go(func() error {
			value, _ := json.Marshal(j.rec)
			cctx, cancel := context.WithTimeout(ctx, kvTimeout)
			defer cancel()
			j.rev, j.err = c.sessions.Update(cctx, j.id, value, j.v.rev)
			return nil
		})
	}
	_ = g.Wait()
}

// updateBatch makes the updates of jobs in one atomic batch and reports
// whether it did. When the outcome is unknown (no answer), the updates are
// then tried one by one: those the batch made show as revision mismatches,
// and the bucket's watcher brings their new records.
func (c *coordinator) updateBatch(ctx context.Context, jobs []claimJob) bool {
	msgs := make([]*nats.Msg, len(jobs))
	for i := range jobs {
		j := &jobs[i]
		value, _ := json.Marshal(j.rec)
		m := nats.NewMsg(sessionSubject(j.id))
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(j.v.rev, 10))
		m.Data = value
		msgs[i] = m
	}
	cctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	ack, err := c.pub.PublishBatch(cctx, msgs)
	if err != nil {
		c.r.log.Debug("updating leases in a batch failed, updating them one by one", "leases", len(jobs), "err", err)
		return false
	}
	first := ack.Sequence - uint64(len(jobs)-1)
	for i := range jobs {
		jobs[i].rev, jobs[i].err = first+uint64(i), nil
	}
	return true
}

// hold starts relaying a session; reconcile wakes the pump once for all it
// took.
func (c *coordinator) hold(id string, draining bool) {
	c.r.mu.Lock()
	c.r.want[id] = &control{draining: draining}
	c.r.wantGen.Add(1)
	c.r.mu.Unlock()
	c.held = true
}

func (c *coordinator) drop(id string) {
	c.r.mu.Lock()
	delete(c.r.want, id)
	c.r.wantGen.Add(1)
	c.r.mu.Unlock()
	c.r.wakeUp()
}

func (c *coordinator) dropAll() {
	c.r.mu.Lock()
	clear(c.r.want)
	c.r.wantGen.Add(1)
	c.r.mu.Unlock()
	c.releasing = map[string]chan struct{}{}
	c.r.wakeUp()
}

// release asks the pump to stop relaying a session, to hand it over.
func (c *coordinator) release(id string) {
	ch := make(chan struct{})
	c.r.mu.Lock()
	if ctl := c.r.want[id]; ctl != nil && ctl.release == nil {
		ctl.release = ch
		c.releasing[id] = ch
		c.r.wantGen.Add(1)
	}
	c.r.mu.Unlock()
	c.r.wakeUp()
}

// finishRelease clears the lease of a session the pump stopped relaying.
func (c *coordinator) finishRelease(ctx context.Context, id string) {
	delete(c.releasing, id)
	c.r.mu.Lock()
	delete(c.r.want, id)
	c.r.wantGen.Add(1)
	c.r.mu.Unlock()
	v := c.recs[id]
	if v == nil || v.rec.Owner != c.owner() {
		return
	}
	rec := SessionRecord{State: v.rec.State}
	value, _ := json.Marshal(rec)
	cctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	if rev, err := c.sessions.Update(cctx, id, value, v.rev); err == nil {
		v.rec, v.rev = rec, rev
		c.r.log.Info("lease handed over", "session_id", id)
	}
}

// finish deletes the record of a drained session and stops relaying it.
func (c *coordinator) finish(ctx context.Context, id string, v *recView) {
	cctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	if err := c.sessions.Delete(cctx, id, jetstream.LastRevision(v.rev)); err != nil {
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && ctx.Err() == nil {
			c.r.log.Warn("removing drained session failed", "session_id", id, "err", err)
		}
		return
	}
	delete(c.recs, id)
	c.drop(id)
	c.r.log.Info("session drained", "session_id", id)
}

// leave hands every held session back and removes the heartbeat, so other
// relays take over at once. It waits for the pump to stop first.
func (c *coordinator) leave() {
	select {
	case <-c.r.pumpDone:
	case <-time.After(c.r.cfg.PublishTimeout):
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c.r.leaseUntil.Store(0)
	me := c.owner()
	var jobs []claimJob
	for id, v := range c.recs {
		if v.rec.Owner == me {
			jobs = append(jobs, claimJob{id: id, v: v, rec: SessionRecord{State: v.rec.State}})
		}
	}
	c.updateAll(ctx, jobs)
	c.hb.leave(ctx)
	c.dropAll()
}
