package relay

import (
	"context"
	"errors"
	"hash/fnv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
)

// coordinator decides which sessions this relay holds. It watches
// relay_sessions and relay_members (where each relay's heartbeat keeps its
// key alive) and takes, keeps, hands over and gives up session leases:
//
//   - Among the live relays, a session belongs to the one that scores
//     highest for it (rendezvous hashing), so relays share sessions evenly
//     and agree on who should hold one without talking to each other.
//   - A lease is the Owner field of the session's record, set with a
//     revision-checked update: two relays cannot both take one.
//   - A lease held by a relay whose heartbeat expired is taken over; a relay
//     that cannot renew its heartbeat stops reading and publishing before
//     the heartbeat can expire (leaseUntil), so the old and the new holder
//     never relay a session at the same time.
type coordinator struct {
	r        *Relay
	sessions jetstream.KeyValue
	members  jetstream.KeyValue

	hb *heartbeat
	// pub writes batches of leases.
	pub *bus.Publisher

	recs       map[string]*recView
	peers      map[string]*peer
	peersInit  bool
	orphaned   map[string]time.Time // sessions without a live holder, since when
	releasing  map[string]chan struct{}
	deadCache  map[string]bool
	sessionsOK bool
	held       bool // a session was taken since the pump was last woken
}

// kvTimeout bounds one KV operation of the coordinator. The heartbeat has
// its own, shorter bound.
const kvTimeout = 5 * time.Second

type recView struct {
	rec SessionRecord
	rev uint64
}

type peer struct {
	incarnation string
	seen        time.Time // last heartbeat seen
	since       time.Time // first heartbeat of this incarnation seen
}

func (c *coordinator) owner() string { return c.r.cfg.Name + "/" + c.hb.incarnation() }

// run keeps the views of both buckets up to date from their watchers and
// reconciles the leases after every change and tick, until ctx ends; then
// it stops the pump and hands the held sessions back.
func (c *coordinator) run(ctx context.Context, stopPump context.CancelFunc) error {
	c.recs = map[string]*recView{}
	c.peers = map[string]*peer{}
	c.orphaned = map[string]time.Time{}
	c.releasing = map[string]chan struct{}{}
	ticker := time.NewTicker(min(c.r.cfg.LeaseTTL/4, time.Second))
	defer ticker.Stop()
	status := c.r.js.Conn().StatusChanged(nats.CONNECTED)
	defer c.r.js.Conn().RemoveStatusListener(status)
	w := &watches{}
	defer w.stop()
	for failures := 0; ; {
		if w.sessions == nil {
			if err := c.watch(ctx, w); err != nil {
				if ctx.Err() != nil {
					break
				}
				c.r.log.Warn("watching the relay buckets failed, retrying", "err", err)
				w.stop()
				failures++
				if !sleep(ctx, backoff(failures)) {
					break
				}
				continue
			}
			failures = 0
		}
		if !c.await(ctx, w, status, ticker.C) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		ready := c.r.leaseValid() && c.sessionsOK && c.peersInit
		if ready {
			c.reconcile(ctx)
		}
		c.r.ready.Store(ready)
	}
	stopPump()
	c.leave()
	return nil
}

// watches are the coordinator's watchers of the sessions and members
// buckets; both are nil while not watching.
type watches struct {
	sessions, members jetstream.KeyWatcher
}

func (w *watches) stop() {
	if w.sessions != nil {
		_ = w.sessions.Stop()
	}
	if w.members != nil {
		_ = w.members.Stop()
	}
	w.sessions, w.members = nil, nil
}

// updates returns the channels of both watchers, nil while not watching.
func (w *watches) updates() (sessions, members <-chan jetstream.KeyValueEntry) {
	if w.sessions == nil {
		return nil, nil
	}
	return w.sessions.Updates(), w.members.Updates()
}

// watch starts watching both buckets, stopping the watchers w had first.
func (c *coordinator) watch(ctx context.Context, w *watches) error {
	w.stop()
	var err error
	if w.sessions, err = c.sessions.WatchAll(ctx); err != nil {
		return err
	}
	if w.members, err = c.members.WatchAll(ctx); err != nil {
		return err
	}
	// The watchers replay every key: rebuild the views from them.
	c.recs = map[string]*recView{}
	c.sessionsOK = false
	c.peersInit = false
	return nil
}

// await waits for something to act on (an update of either bucket, a
// reconnect, the heartbeat lost, the tick, ctx ending) and applies it. It
// reports false when the watchers stopped and must be started again.
func (c *coordinator) await(ctx context.Context, w *watches, status <-chan nats.Status, tick <-chan time.Time) bool {
	swc, mwc := w.updates()
	select {
	case <-ctx.Done():
	case e, ok := <-swc:
		if !ok {
			w.stop()
			return false
		}
		c.applySession(e)
		c.applyPending(swc)
	case e, ok := <-mwc:
		if !ok {
			w.stop()
			return false
		}
		c.applyMember(e)
	case <-status:
		// After a reconnect the watchers may have missed updates or lost
		// their consumers with a restarted server: start them again.
		w.stop()
		return false
	case <-c.hb.lost:
		c.dropAll()
	case <-tick:
	}
	return true
}

// applyPending applies the session updates already waiting, so that one
// reconcile serves them all.
func (c *coordinator) applyPending(updates <-chan jetstream.KeyValueEntry) {
	for {
		select {
		case e, ok := <-updates:
			if !ok {
				return
			}
			c.applySession(e)
		default:
			return
		}
	}
}

func (c *coordinator) applySession(e jetstream.KeyValueEntry) {
	if e == nil {
		c.sessionsOK = true
		return
	}
	if e.Operation() != jetstream.KeyValuePut {
		delete(c.recs, e.Key())
		return
	}
	if !ValidSessionID(e.Key()) {
		return
	}
	c.recs[e.Key()] = &recView{rec: decodeRecord(e.Value()), rev: e.Revision()}
}

func (c *coordinator) applyMember(e jetstream.KeyValueEntry) {
	if e == nil {
		c.peersInit = true
		return
	}
	name := e.Key()
	if name == c.r.cfg.Name {
		return
	}
	if e.Operation() != jetstream.KeyValuePut {
		delete(c.peers, name)
		return
	}
	now := time.Now()
	inc := string(e.Value())
	p := c.peers[name]
	if p == nil || p.incarnation != inc {
		since := now
		if !c.peersInit {
			// It was alive before this relay started: no need to wait and see.
			since = time.Time{}
		}
		p = &peer{incarnation: inc, since: since}
		c.peers[name] = p
	}
	p.seen = now
}

// leasePass is what one reconcile decides by, read once at its start.
type leasePass struct {
	now time.Time
	// me is the Owner of this relay's leases. It is read once: the
	// heartbeat may change the incarnation meanwhile.
	me         string
	candidates []string            // the relays sessions are shared among
	held       map[string]*control // the sessions the pump was asked to relay
}

// reconcile takes, keeps, hands over and gives up leases.
func (c *coordinator) reconcile(ctx context.Context) {
	now := time.Now()
	pass := &leasePass{now: now, me: c.owner()}
	c.deadCache = map[string]bool{}
	pass.candidates = c.candidates(now)
	c.finishReleases(ctx)
	pass.held = c.heldControls()

	var claims []claimJob
	for id, v := range c.recs {
		if _, busy := c.releasing[id]; busy {
			continue
		}
		if c.reconcileRecord(ctx, pass, id, v) {
			claims = append(claims, claimJob{id: id, v: v})
		}
	}
	c.claimAll(ctx, claims)
	if c.held {
		c.held = false
		c.r.wakeUp()
	}
	c.dropUnlisted(pass.held)
	for id := range c.orphaned {
		if _, ok := c.recs[id]; !ok {
			delete(c.orphaned, id)
		}
	}
}

// finishReleases clears the leases of the sessions the pump has stopped
// relaying since they were released.
func (c *coordinator) finishReleases(ctx context.Context) {
	for id, ch := range c.releasing {
		select {
		case <-ch:
			c.finishRelease(ctx, id)
		default:
		}
	}
}

// heldControls returns a copy of the sessions the pump was asked to relay.
func (c *coordinator) heldControls() map[string]*control {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	held := make(map[string]*control, len(c.r.want))
	for id, ctl := range c.r.want {
		held[id] = ctl
	}
	return held
}

// reconcileRecord acts on the record v of session id, by who holds its
// lease, and reports whether to claim the lease.
func (c *coordinator) reconcileRecord(ctx context.Context, pass *leasePass, id string, v *recView) bool {
	desired := rendezvous(id, pass.candidates)
	ctl := pass.held[id]
	switch owner := v.rec.Owner; {
	case owner == pass.me:
		delete(c.orphaned, id)
		c.keep(ctx, id, v, ctl, desired, pass.now)
		return false
	case owner == "":
		if ctl != nil {
			c.drop(id)
		}
		return c.orphanDue(id, desired, pass.now)
	default:
		return c.heldElsewhere(ctx, id, owner, ctl, desired, pass.now)
	}
}

// keep acts on a session whose lease this relay holds: the pump relays
// it, following its draining state; once drained it ends, and when it
// belongs to another relay that is steadily alive it is handed over.
func (c *coordinator) keep(ctx context.Context, id string, v *recView, ctl *control, desired string, now time.Time) {
	if ctl == nil {
		c.hold(id, v.rec.State == StateDraining)
		return
	}
	c.r.mu.Lock()
	if draining := v.rec.State == StateDraining; ctl.draining != draining {
		ctl.draining = draining
		c.r.wantGen.Add(1)
	}
	drained := ctl.drained
	c.r.mu.Unlock()
	switch {
	case ctl.draining && drained:
		c.finish(ctx, id, v)
	case !ctl.draining && desired != c.r.cfg.Name && c.stable(desired, now):
		c.release(id)
	}
}

// heldElsewhere acts on a session whose lease names another holder: the
// pump stops relaying it, and it is claimed when an earlier run of this
// relay held it, or when its holder is dead and the orphan is due.
func (c *coordinator) heldElsewhere(ctx context.Context, id, owner string, ctl *control, desired string, now time.Time) bool {
	if ctl != nil {
		c.r.log.Warn("lease lost", "session_id", id, "holder", owner)
		c.drop(id)
	}
	name, inc, _ := strings.Cut(owner, "/")
	if name == c.r.cfg.Name {
		// An earlier run of this relay held it.
		return true
	}
	if !c.dead(ctx, name, inc, now) {
		delete(c.orphaned, id)
		return false
	}
	return c.orphanDue(id, desired, now)
}

// orphanDue notes since when session id has had no live holder and reports
// whether to claim it now: at once when it belongs to this relay, else
// once the relay it belongs to had two lease periods to take it.
func (c *coordinator) orphanDue(id, desired string, now time.Time) bool {
	since, ok := c.orphaned[id]
	if !ok {
		since = now
		c.orphaned[id] = now
	}
	return desired == c.r.cfg.Name || now.Sub(since) > 2*c.r.cfg.LeaseTTL
}

// dropUnlisted stops relaying the sessions of held whose record is gone,
// but those being released and those the pump was asked to stop already.
func (c *coordinator) dropUnlisted(held map[string]*control) {
	for id := range held {
		_, listed := c.recs[id]
		_, busy := c.releasing[id]
		c.r.mu.Lock()
		_, still := c.r.want[id]
		c.r.mu.Unlock()
		if !listed && !busy && still {
			c.r.log.Info("session no longer listed, stopping", "session_id", id)
			c.drop(id)
		}
	}
}

// candidates returns the relays sessions are shared among: this one and the
// peers whose heartbeat has been seen steadily for a lease period.
func (c *coordinator) candidates(now time.Time) []string {
	names := []string{c.r.cfg.Name}
	for name := range c.peers {
		if c.stable(name, now) {
			names = append(names, name)
		}
	}
	return names
}

func (c *coordinator) stable(name string, now time.Time) bool {
	if name == c.r.cfg.Name {
		return true
	}
	// A heartbeat comes every third of a lease: one missed and the peer is
	// not counted on any more.
	p := c.peers[name]
	ttl := c.r.cfg.LeaseTTL
	return p != nil && now.Sub(p.seen) < ttl*2/3 && now.Sub(p.since) >= ttl
}

// dead reports whether the relay incarnation name/inc has certainly stopped:
// its heartbeat key is gone or belongs to another incarnation.
func (c *coordinator) dead(ctx context.Context, name, inc string, now time.Time) bool {
	if p := c.peers[name]; p != nil && p.incarnation == inc && now.Sub(p.seen) < c.r.cfg.LeaseTTL {
		return false
	}
	if d, ok := c.deadCache[name+"/"+inc]; ok {
		return d
	}
	gctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	e, err := c.members.Get(gctx, name)
	d := false
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		d = true
	case err == nil:
		d = string(e.Value()) != inc
	}
	c.deadCache[name+"/"+inc] = d
	return d
}

// rendezvous returns the member scoring highest for id.
func rendezvous(id string, members []string) string {
	var best string
	var bestScore uint64
	for _, m := range members {
		h := fnv.New64a()
		_, _ = h.Write([]byte(id))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(m))
		// FNV alone mixes the last bytes poorly; finish with a 64-bit mixer.
		s := mix64(h.Sum64())
		if best == "" || s > bestScore || (s == bestScore && m < best) {
			best, bestScore = m, s
		}
	}
	return best
}

func mix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb53fe63a9e87
	x ^= x >> 33
	return x
}
