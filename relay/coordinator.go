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

func (c *coordinator) run(ctx context.Context, stopPump context.CancelFunc) error {
	c.recs = map[string]*recView{}
	c.peers = map[string]*peer{}
	c.orphaned = map[string]time.Time{}
	c.releasing = map[string]chan struct{}{}
	ttl := c.r.cfg.LeaseTTL
	tick := min(ttl/4, time.Second)
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	status := c.r.js.Conn().StatusChanged(nats.CONNECTED)
	defer c.r.js.Conn().RemoveStatusListener(status)

	var sw, mw jetstream.KeyWatcher
	stopWatch := func() {
		if sw != nil {
			_ = sw.Stop()
		}
		if mw != nil {
			_ = mw.Stop()
		}
		sw, mw = nil, nil
	}
	defer stopWatch()
	startWatch := func() error {
		stopWatch()
		var err error
		if sw, err = c.sessions.WatchAll(ctx); err != nil {
			return err
		}
		if mw, err = c.members.WatchAll(ctx); err != nil {
			return err
		}
		// The watchers replay every key: rebuild the views from them.
		c.recs = map[string]*recView{}
		c.sessionsOK = false
		c.peersInit = false
		return nil
	}

	for failures := 0; ; {
		if sw == nil {
			if err := startWatch(); err != nil {
				if ctx.Err() != nil {
					break
				}
				c.r.log.Warn("watching the relay buckets failed, retrying", "err", err)
				stopWatch()
				failures++
				if !sleep(ctx, backoff(failures)) {
					break
				}
				continue
			}
			failures = 0
		}
		var swc, mwc <-chan jetstream.KeyValueEntry
		if sw != nil {
			swc, mwc = sw.Updates(), mw.Updates()
		}
		select {
		case <-ctx.Done():
		case e, ok := <-swc:
			if !ok {
				stopWatch()
				continue
			}
			c.applySession(e)
			for more := true; more; {
				select {
				case e, ok := <-swc:
					if !ok {
						more = false
						break
					}
					c.applySession(e)
				default:
					more = false
				}
			}
		case e, ok := <-mwc:
			if !ok {
				stopWatch()
				continue
			}
			c.applyMember(e)
		case <-status:
			// After a reconnect the watchers may have missed updates or lost
			// their consumers with a restarted server: start them again.
			stopWatch()
			continue
		case <-c.hb.lost:
			c.dropAll()
		case <-ticker.C:
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

// reconcile takes, keeps, hands over and gives up leases.
func (c *coordinator) reconcile(ctx context.Context) {
	now := time.Now()
	ttl := c.r.cfg.LeaseTTL
	me := c.owner()
	c.deadCache = map[string]bool{}
	candidates := c.candidates(now)

	for id, ch := range c.releasing {
		select {
		case <-ch:
			c.finishRelease(ctx, id)
		default:
		}
	}

	c.r.mu.Lock()
	held := make(map[string]*control, len(c.r.want))
	for id, ctl := range c.r.want {
		held[id] = ctl
	}
	c.r.mu.Unlock()

	var claims []claimJob
	for id, v := range c.recs {
		if _, busy := c.releasing[id]; busy {
			continue
		}
		rec := v.rec
		desired := rendezvous(id, candidates)
		ctl := held[id]
		switch {
		case rec.Owner == me:
			delete(c.orphaned, id)
			if ctl == nil {
				c.hold(id, rec.State == StateDraining)
				continue
			}
			c.r.mu.Lock()
			if draining := rec.State == StateDraining; ctl.draining != draining {
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
		case rec.Owner == "":
			if ctl != nil {
				c.drop(id)
			}
			since, ok := c.orphaned[id]
			if !ok {
				since = now
				c.orphaned[id] = now
			}
			if desired == c.r.cfg.Name || now.Sub(since) > 2*ttl {
				claims = append(claims, claimJob{id: id, v: v})
			}
		default:
			if ctl != nil {
				c.r.log.Warn("lease lost", "session_id", id, "holder", rec.Owner)
				c.drop(id)
			}
			name, inc, _ := strings.Cut(rec.Owner, "/")
			if name == c.r.cfg.Name {
				// An earlier run of this relay held it.
				claims = append(claims, claimJob{id: id, v: v})
				continue
			}
			if !c.dead(ctx, name, inc, now) {
				delete(c.orphaned, id)
				continue
			}
			since, ok := c.orphaned[id]
			if !ok {
				since = now
				c.orphaned[id] = now
			}
			if desired == c.r.cfg.Name || now.Sub(since) > 2*ttl {
				claims = append(claims, claimJob{id: id, v: v})
			}
		}
	}
	c.claimAll(ctx, claims)
	if c.held {
		c.held = false
		c.r.wakeUp()
	}
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
	for id := range c.orphaned {
		if _, ok := c.recs[id]; !ok {
			delete(c.orphaned, id)
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
