package domain

import (
	"time"
)

// DefaultMaxConcurrentSessions is the pool size when none is configured.
const DefaultMaxConcurrentSessions = 20

// MaxMaxConcurrentSessions is the largest pool size a user may set: far
// beyond what any API quota runs at once, so a larger value is a mistake.
const MaxMaxConcurrentSessions = 10000

// SessionPoolConfig is a user's concurrency setting.
type SessionPoolConfig struct {
	// MaxConcurrentSessions is how many of the user's sessions may hold a
	// slot (have a live sidecar) at once; 1 to MaxMaxConcurrentSessions.
	MaxConcurrentSessions int `json:"maxConcurrentSessions"`
}

// Validate checks a size a user sets for their own pool, where 0 is no
// default but a mistake.
func (c SessionPoolConfig) Validate() error {
	switch {
	case c.MaxConcurrentSessions < 1:
		return invalid("maxConcurrentSessions", "must be at least 1")
	case c.MaxConcurrentSessions > MaxMaxConcurrentSessions:
		return invalid("maxConcurrentSessions", "must be at most %d", MaxMaxConcurrentSessions)
	}
	return nil
}

// SessionPoolUtilization is a snapshot of a pool's use, for the UI.
type SessionPoolUtilization struct {
	ActiveCount        int     `json:"activeCount"`
	MaxCount           int     `json:"maxCount"`
	AvailableSlots     int     `json:"availableSlots"`
	UtilizationPercent float64 `json:"utilizationPercent"`
}

// SessionPool is the domain service that caps how many sessions of one
// owner run at once: concurrent sessions spend API quota and money, so the
// cap is a business rule. It keeps no state: the caller counts the owner's
// sessions in PoolSlotStatuses (in the same transaction that saves the
// session) and passes the count in.
type SessionPool struct {
	max int
}

// NewSessionPool returns a pool with the configured size (0 means
// DefaultMaxConcurrentSessions).
func NewSessionPool(cfg SessionPoolConfig) (SessionPool, error) {
	if cfg.MaxConcurrentSessions == 0 {
		cfg.MaxConcurrentSessions = DefaultMaxConcurrentSessions
	}
	if err := cfg.Validate(); err != nil {
		return SessionPool{}, err
	}
	return SessionPool{max: cfg.MaxConcurrentSessions}, nil
}

// MaxCount returns the pool's size.
func (p SessionPool) MaxCount() int {
	if p.max == 0 {
		return DefaultMaxConcurrentSessions
	}
	return p.max
}

// CanAllocate reports whether one more session fits next to activeCount.
func (p SessionPool) CanAllocate(activeCount int) bool { return activeCount < p.MaxCount() }

// Allocate gives a Queued session a slot and starts it (Start: Queued ->
// Running), raising SessionAllocatedEvent and AgentSessionStartedEvent on
// the session. When the pool is full the session stays Queued, raises
// SessionPoolExhaustedEvent and a *PoolExhaustedError (which carries the
// event too) is returned: save the session anyway, or publish the error's
// event, so the owner is told. Any error of Start (no API key, spent
// budget, not Queued) is returned as is, with no allocation.
func (p SessionPool) Allocate(s *AgentSession, activeCount int, now time.Time) error {
	if err := s.allow(OpStart); err != nil {
		return err
	}
	if !p.CanAllocate(activeCount) {
		e := SessionPoolExhaustedEvent{SessionMeta: s.meta(now), AttemptedSessionID: s.id, CurrentCount: activeCount, MaxCount: p.MaxCount()}
		s.raise(e)
		return &PoolExhaustedError{ActiveCount: activeCount, MaxCount: p.MaxCount(), Event: e}
	}
	pending := len(s.events)
	if err := s.Start(now); err != nil {
		return err
	}
	allocated := SessionAllocatedEvent{SessionMeta: s.meta(now), ActiveCount: activeCount + 1, MaxCount: p.MaxCount()}
	// The allocation precedes the start in the event order.
	s.events = append(s.events[:pending], append([]Event{allocated}, s.events[pending:]...)...)
	return nil
}

// Release gives back the slot of a session that no longer holds one (it
// reached a terminal status) and raises SessionReleasedEvent on it.
// activeCount is the owner's count without this session.
func (p SessionPool) Release(s *AgentSession, activeCount int, now time.Time) error {
	if s.status.HasSidecar() || s.status == StatusQueued {
		return s.refuse("Release", ErrInvalidTransition)
	}
	s.raise(SessionReleasedEvent{SessionMeta: s.meta(now), ActiveCount: activeCount, MaxCount: p.MaxCount()})
	return nil
}

// Utilization returns the pool's use for activeCount sessions.
func (p SessionPool) Utilization(activeCount int) SessionPoolUtilization {
	m := p.MaxCount()
	return SessionPoolUtilization{ActiveCount: activeCount, MaxCount: m, AvailableSlots: max(0, m-activeCount),
		UtilizationPercent: float64(activeCount) / float64(m) * 100}
}
