package reactions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres/queries"
	"github.com/agentbus/agentbus/sidecar/launcher"
	"github.com/agentbus/agentbus/sidecar/runners"
)

// stopWait bounds how long a release waits for the runner to stop the
// session's sidecar before the relay drains the session's streams.
const stopWait = 15 * time.Second

// Placement places the runtime's sessions on runners (package runners):
// the runtime composes what each sidecar starts with, and the runner the
// session is assigned to starts it.
type Placement struct {
	Store *runners.Store
	// RedisURL is the Redis the sidecars reach; each gets a user of its
	// session's own on it.
	RedisURL string

	mu       sync.Mutex
	cache    *runners.Cache
	live     runners.Liveness
	reserved map[string]int
}

// start watches the assignments and reads the leases.
func (p *Placement) start(ctx context.Context) error {
	cache, err := p.Store.Watch(ctx)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.cache, p.live.TTL, p.reserved = cache, p.Store.TTL, map[string]int{}
	p.mu.Unlock()
	return p.refresh(ctx)
}

// refresh reads the runners' leases.
func (p *Placement) refresh(ctx context.Context) error {
	leases, err := p.Store.Leases(ctx)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.live.Observe(leases, time.Now())
	p.mu.Unlock()
	return nil
}

// Live reports whether the runner's lease is live.
func (p *Placement) Live(runner string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live.Live(runner)
}

// reserve returns the runner the session is to run on: the one it is
// assigned to while that one lives, else the live runner with the most
// room, whose slot is reserved until the assignment is written (release).
func (p *Placement) reserve(a runners.Assignment) (runner string, release func(), ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a.Runner != "" && p.live.Live(a.Runner) {
		return a.Runner, func() {}, true
	}
	load := p.cache.Load()
	for name, n := range p.reserved {
		load[name] += n
	}
	runner, ok = p.live.Choose(load)
	if !ok {
		return "", nil, false
	}
	p.reserved[runner]++
	return runner, func() {
		p.mu.Lock()
		p.reserved[runner]--
		p.mu.Unlock()
	}, true
}

// ensurePlaced assigns a session that needs a sidecar to a live runner,
// with a new sidecar to start, unless its sidecar of this run is assigned
// to a live runner already. With no room anywhere it waits, assigned to
// none. A sidecar that ran before in this run resumes its agent.
func (r Runtime) ensurePlaced(ctx context.Context, s *domain.AgentSession) error {
	p, id := r.Placement, s.ID().String()
	a, rev, err := p.Store.Assignment(ctx, id)
	if err != nil {
		return err
	}
	sameRun := rev != 0 && a.Attempt >= s.RetryCount()
	if sameRun && !a.Waiting() && !a.Exited && p.Live(a.Runner) {
		return nil // a redelivered allocation
	}
	runner, release, ok := p.reserve(a)
	if !ok {
		return r.waitForRunner(ctx, a, rev, s)
	}
	defer release()
	// A sidecar of this run was asked for before: the next one resumes its
	// agent, wherever it runs; a retry's first one starts afresh.
	cfg, key, limits, ok, err := r.prepareStart(ctx, s, sameRun && a.Started)
	if err != nil || !ok {
		return err
	}
	moved := rev != 0 && a.Runner != runner
	redisURL, err := launcher.PlaceRedisUser(ctx, r.Redis, p.RedisURL, id, moved)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	next := runners.Assignment{SessionID: id, Runner: runner, Gen: nextGen(a, rev), Attempt: s.RetryCount(), Started: true, Config: raw,
		APIKey: key, RedisURL: redisURL, MaxProcesses: limits.processes, MaxMemory: limits.memory}
	newRev, err := p.Store.Put(ctx, next, rev)
	if err != nil {
		return fmt.Errorf("assign %s to runner %s: %w", id, runner, err)
	}
	p.cache.Note(next, newRev)
	slog.Info("session placed", "component", "runtime", "session_id", id, "runner", runner, "gen", next.Gen,
		"from", a.Runner, "resumed", cfg.ResumeEngineSessionID != "")
	return nil
}

// nextGen numbers the sidecar asked for after a's. A session's first
// assignment, or its first after one was removed (a run that ended, then
// a retry), starts from the clock, so no runner takes it for a sidecar
// it started before.
func nextGen(a runners.Assignment, rev uint64) uint64 {
	if rev == 0 {
		return max(a.Gen+1, uint64(time.Now().UnixNano()))
	}
	return a.Gen + 1
}

// waitForRunner records that the session waits for a runner with room. A
// sidecar of it that may still run on a runner given up on is fenced off
// first.
func (r Runtime) waitForRunner(ctx context.Context, a runners.Assignment, rev uint64, s *domain.AgentSession) error {
	id := s.ID().String()
	if rev != 0 && a.Waiting() {
		return nil
	}
	if a.Runner != "" {
		if err := launcher.FenceRedisUser(ctx, r.Redis, id); err != nil {
			return err
		}
	}
	next := runners.Assignment{SessionID: id, Gen: a.Gen, Attempt: a.Attempt, Started: a.Started}
	if rev == 0 {
		next.Gen, next.Attempt = nextGen(a, rev), s.RetryCount()
	}
	newRev, err := r.Placement.Store.Put(ctx, next, rev)
	if err != nil {
		return fmt.Errorf("session %s waits for a runner: %w", id, err)
	}
	r.Placement.cache.Note(next, newRev)
	slog.Info("session waits for a runner with room", "component", "runtime", "session_id", id, "from", a.Runner)
	return nil
}

// releasePlaced removes the assignment of a session that is over, waits
// for its runner to stop its sidecar, and removes its Redis user.
func (r Runtime) releasePlaced(ctx context.Context, id string) error {
	p := r.Placement
	a, rev, err := p.Store.Assignment(ctx, id)
	if err != nil {
		return err
	}
	if rev != 0 {
		if err := p.Store.Remove(ctx, id); err != nil {
			return err
		}
		p.cache.Forget(id)
	}
	if a.Runner != "" && p.Live(a.Runner) {
		r.waitStopped(ctx, a.Runner, id)
	}
	if err := launcher.DropRedisUser(ctx, r.Redis, id); err != nil {
		slog.Warn("Redis user of the sidecar not removed", "component", "runtime", "session_id", id, "error", err)
	}
	return nil
}

// waitStopped waits, for stopWait at most, until the runner no longer
// records a sidecar of the session.
func (r Runtime) waitStopped(ctx context.Context, runner, id string) {
	ctx, cancel := context.WithTimeout(ctx, stopWait)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		n, err := r.Redis.HExists(ctx, launcher.RecordsKey(runner), id).Result()
		if err == nil && !n || errors.Is(err, redis.Nil) {
			return
		}
		select {
		case <-ctx.Done():
			slog.Warn("the runner did not stop the sidecar in time", "component", "runtime", "session_id", id, "runner", runner)
			return
		case <-t.C:
		}
	}
}

// hasSidecarPlaced reports whether a runner runs the session's sidecar,
// or will run one again.
func (r Runtime) hasSidecarPlaced(ctx context.Context, id string) (bool, error) {
	a, rev, err := r.Placement.Store.Assignment(ctx, id)
	return rev != 0 && !a.Waiting(), err
}

// reconcilePlaced places the sessions that wait for a runner, whose
// sidecar exited or whose runner's lease lapsed, and releases those that
// are over.
func (r Runtime) reconcilePlaced(ctx context.Context) error {
	p := r.Placement
	if err := p.refresh(ctx); err != nil {
		return err
	}
	all := p.cache.All()
	ids := make([]uuid.UUID, 0, len(all))
	for s := range all {
		if id, err := uuid.Parse(s); err == nil {
			ids = append(ids, id)
		}
	}
	statuses, err := queries.SessionStatuses(ctx, r.DB, ids)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		a := all[id.String()]
		switch st, ok := statuses[id]; {
		case !ok || !st.HasSidecar():
			errs = append(errs, r.release(ctx, id))
		case a.Waiting() || a.Exited || !p.Live(a.Runner):
			if err := r.ensure(ctx, id, true); err != nil && !runners.Conflict(err) {
				errs = append(errs, fmt.Errorf("place %s: %w", id, err))
			}
		}
	}
	return errors.Join(errs...)
}
