package runners

import (
	"sort"
	"time"
)

// Liveness tells live runners from lapsed ones by the revisions of their
// leases as this process saw them change, on its own clock: a runner is
// live while its lease changed within the TTL. Hosts' clocks never need to
// agree, and a placer that just started gives every lease a full TTL.
type Liveness struct {
	// TTL is how long a lease lasts without a renewal.
	TTL  time.Duration
	seen map[string]seenLease
	// observed is when the leases were last read: a lease lapses when it
	// did not change for a TTL of reads, never because this process read
	// them late (a placer slowed down gives up on no runner).
	observed time.Time
}

type seenLease struct {
	entry RunnerEntry
	at    time.Time
}

// Observe records the leases read at now; a runner whose lease is gone
// is lapsed from then on.
func (l *Liveness) Observe(leases map[string]RunnerEntry, now time.Time) {
	if l.seen == nil {
		l.seen = map[string]seenLease{}
	}
	l.observed = now
	for name := range l.seen {
		if _, ok := leases[name]; !ok {
			delete(l.seen, name)
		}
	}
	for name, e := range leases {
		if prev, ok := l.seen[name]; ok && prev.entry.Revision == e.Revision {
			continue
		}
		l.seen[name] = seenLease{entry: e, at: now}
	}
}

// Live reports whether the runner's lease changed within the TTL before
// the last read of the leases.
func (l *Liveness) Live(name string) bool {
	s, ok := l.seen[name]
	return ok && l.observed.Sub(s.at) < l.TTL
}

// Age returns how long ago, by now, the runner's lease last changed.
func (l *Liveness) Age(name string, now time.Time) (time.Duration, bool) {
	s, ok := l.seen[name]
	return now.Sub(s.at), ok
}

// Lease returns the runner's lease as last seen.
func (l *Liveness) Lease(name string) (Lease, bool) {
	s, ok := l.seen[name]
	return s.entry.Lease, ok
}

// Names returns the runners seen, in order.
func (l *Liveness) Names() []string {
	out := make([]string, 0, len(l.seen))
	for name := range l.seen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Choose returns the live runner, not draining, with the most free
// capacity given load (sessions assigned, by runner), or false when every
// one is full. Ties go to the first name, so placements are repeatable.
func (l *Liveness) Choose(load map[string]int) (string, bool) {
	best, free := "", 0
	for _, name := range l.Names() {
		lease := l.seen[name].entry.Lease
		if !l.Live(name) || lease.Draining {
			continue
		}
		if f := lease.Capacity - load[name]; f > free {
			best, free = name, f
		}
	}
	return best, best != ""
}
