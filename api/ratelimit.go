package api

import (
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/time/rate"
)

// SessionLimiter limits how fast each session takes something (the
// message queue: how many messages a caller may enqueue), with a token
// bucket per session.
type SessionLimiter struct {
	limit rate.Limit
	burst int

	mu       sync.Mutex
	sessions map[uuid.UUID]*sessionBucket
	swept    time.Time
	now      func() time.Time
}

type sessionBucket struct {
	limiter  *rate.Limiter
	lastUsed time.Time
}

// NewSessionLimiter allows each session perSecond events on average and
// burst at once.
func NewSessionLimiter(perSecond float64, burst int) *SessionLimiter {
	if burst < 1 {
		burst = 1
	}
	return &SessionLimiter{limit: rate.Limit(perSecond), burst: burst,
		sessions: map[uuid.UUID]*sessionBucket{}, now: time.Now}
}

// Allow takes one event for session id. It returns nil, or an error of
// kind rate_limited that carries when to retry (MapError answers it with
// 429 and Retry-After).
func (l *SessionLimiter) Allow(id uuid.UUID) error {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	b, ok := l.sessions[id]
	if !ok {
		b = &sessionBucket{limiter: rate.NewLimiter(l.limit, l.burst)}
		l.sessions[id] = b
	}
	b.lastUsed = now
	r := b.limiter.ReserveN(now, 1)
	if !r.OK() {
		return NewKindError(KindRateLimited, "too many requests for this session").WithRetryAfter(time.Second)
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return NewKindError(KindRateLimited, "too many requests for this session; retry later").WithRetryAfter(d)
	}
	return nil
}

// sweep forgets, once a minute, the sessions whose bucket has been full
// again for a while, so the map does not grow with every session ever seen.
func (l *SessionLimiter) sweep(now time.Time) {
	if now.Sub(l.swept) < time.Minute {
		return
	}
	l.swept = now
	idle := time.Minute
	if l.limit > 0 {
		if full := time.Duration(float64(l.burst) / float64(l.limit) * float64(time.Second)); full > idle {
			idle = full
		}
	}
	for id, b := range l.sessions {
		if now.Sub(b.lastUsed) > idle {
			delete(l.sessions, id)
		}
	}
}
