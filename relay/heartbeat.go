package relay

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// heartbeat keeps this relay's key in relay_members alive, on its own
// goroutine so that no amount of lease work delays it.
type heartbeat struct {
	r       *Relay
	members jetstream.KeyValue
	// lost is signalled when the key expired: the coordinator then drops
	// every session, which the next reconcile takes back where it can.
	lost chan struct{}

	mu  sync.Mutex
	inc string
	rev uint64
}

func newHeartbeat(r *Relay, members jetstream.KeyValue) *heartbeat {
	return &heartbeat{r: r, members: members, lost: make(chan struct{}, 1), inc: randomHex(6)}
}

// incarnation tells this run of the relay from earlier ones under the same
// name, and changes when the heartbeat expired; leases name
// "<name>/<incarnation>".
func (h *heartbeat) incarnation() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inc
}

func (h *heartbeat) run(ctx context.Context) {
	every := h.r.cfg.LeaseTTL / 3
	for {
		h.beat(ctx)
		if !sleep(ctx, every) {
			return
		}
	}
}

// beat renews the heartbeat, or writes it on the first call.
func (h *heartbeat) beat(ctx context.Context) {
	ttl := h.r.cfg.LeaseTTL
	h.mu.Lock()
	inc, last := h.inc, h.rev
	h.mu.Unlock()
	sent := time.Now()
	bctx, cancel := context.WithTimeout(ctx, ttl/3)
	defer cancel()
	var (
		rev uint64
		err error
	)
	if last == 0 {
		rev, err = h.members.Create(bctx, h.r.cfg.Name, []byte(inc))
		if errors.Is(err, jetstream.ErrKeyExists) {
			// An earlier run under this name has not expired yet: its leases
			// are ours to take back.
			h.r.log.Info("taking over the heartbeat of an earlier run of this relay")
			rev, err = h.members.Put(bctx, h.r.cfg.Name, []byte(inc))
		}
	} else {
		rev, err = h.members.Update(bctx, h.r.cfg.Name, []byte(inc), last)
	}
	switch {
	case err == nil:
		h.mu.Lock()
		h.rev = rev
		h.mu.Unlock()
		// The key lives at least ttl from the moment it was written, which is
		// after sent. Stop short of that by a fifth for clock-rate drift and
		// for a publish already on the wire.
		h.r.leaseUntil.Store(sent.Add(ttl * 4 / 5).UnixNano())
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyNotFound):
		// The heartbeat expired: other relays may have taken our sessions.
		// Join again as a new incarnation.
		h.r.log.Warn("heartbeat expired, rejoining")
		h.r.leaseUntil.Store(0)
		h.mu.Lock()
		h.inc, h.rev = randomHex(6), 0
		h.mu.Unlock()
		select {
		case h.lost <- struct{}{}:
		default:
		}
	default:
		if ctx.Err() == nil {
			h.r.log.Warn("heartbeat failed", "err", err)
		}
	}
}

// leave removes the heartbeat key, so other relays need not wait for it to
// expire.
func (h *heartbeat) leave(ctx context.Context) {
	h.r.leaseUntil.Store(0)
	h.mu.Lock()
	rev := h.rev
	h.mu.Unlock()
	if rev != 0 {
		_ = h.members.Delete(ctx, h.r.cfg.Name, jetstream.LastRevision(rev))
	}
}
