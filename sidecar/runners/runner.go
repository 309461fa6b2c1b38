package runners

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/agentbus/agentbus/sidecar/launcher"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// Sidecars start and watch the sidecars of a runner. A launcher.Launcher
// does, with a process for each; a benchmark of the fleet runs stand-ins
// in the runner's process instead, so that one machine holds a thousand.
type Sidecars interface {
	// Start takes over the sidecars an earlier run recorded.
	Start(ctx context.Context) error
	// Close stops every sidecar; each resumes where it is placed next.
	Close() error
	// StartSession starts the session's sidecar.
	StartSession(ctx context.Context, cfg protocol.Config, apiKey string, opts ...launcher.StartOption) (launcher.Handle, error)
	// Stop ends the session's sidecar; launcher.ErrNotRunning when none runs.
	Stop(sessionID string) error
	// Forget drops the record of a sidecar that exited.
	Forget(ctx context.Context, sessionID string) error
	// Running returns the sidecars running.
	Running() []launcher.Handle
	// PID returns the process of the session's sidecar, while it runs.
	PID(sessionID string) (int, bool)
	// Exited returns the sessions whose sidecar exited without ending
	// its session.
	Exited(ctx context.Context) ([]string, error)
	// Exits is signalled when a sidecar exited without ending its session.
	Exits() <-chan struct{}
}

var _ Sidecars = (*launcher.Launcher)(nil)

// Runner runs the sidecars of the sessions assigned to it, with its
// launcher, and keeps its lease while it runs. It needs NATS and Redis
// only: what a sidecar starts with comes in its assignment.
type Runner struct {
	// Name identifies the runner; it is also its launcher's name.
	Name string
	// Capacity is how many sidecars it runs at most.
	Capacity int
	Store    *Store
	// Launcher starts the sidecars: a launcher.Launcher with
	// Config.PlacedRedisUsers set. Run starts and closes it.
	Launcher Sidecars
	// DrainTimeout is how long, once Run's context ends, the runner drains
	// (the placer moves its sessions elsewhere, each between two turns)
	// before it stops the sidecars still here; zero stops them at once.
	DrainTimeout time.Duration
	Log          *slog.Logger

	cache    *Cache
	gens     map[string]uint64
	draining atomic.Bool
	// renewNow asks for a renewal of the lease now.
	renewNow chan struct{}
}

// Run keeps the lease and the sidecars until ctx ends; then it drains for
// DrainTimeout at most, stops its sidecars and gives its lease up, so the
// sessions still here go elsewhere at once.
func (r *Runner) Run(ctx context.Context) error {
	if r.Log == nil {
		r.Log = slog.Default()
	}
	r.Log = r.Log.With("component", "runner", "runner", r.Name)
	// life outlives ctx for the drain: the lease, the watch of the
	// assignments and the sidecars go on until the runner leaves.
	life, end := context.WithCancel(context.WithoutCancel(ctx))
	defer end()
	if err := r.Launcher.Start(life); err != nil {
		return err
	}
	cache, err := r.Store.Watch(life)
	if err != nil {
		return err
	}
	r.cache, r.gens, r.renewNow = cache, map[string]uint64{}, make(chan struct{}, 1)
	defer r.leave()
	// The lease is renewed apart from the work on the sidecars, which may
	// take a while (a sidecar's stop waits for it to exit).
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		r.keepLease(life)
	}()
	defer func() { end(); <-renewed }()
	r.serve(ctx, life, nil)
	r.drain(life)
	return nil
}

// serve applies the assignments until ctx ends, or until done says so
// after an application.
func (r *Runner) serve(ctx, life context.Context, done func() bool) {
	resync := time.NewTicker(r.Store.TTL / 3)
	defer resync.Stop()
	for {
		r.apply(life)
		if done != nil && done() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-resync.C:
		case <-r.cache.Changed():
		case <-r.Launcher.Exits():
		}
	}
}

// drain marks the lease draining and serves until no session is
// assigned here any more, for DrainTimeout at most.
func (r *Runner) drain(life context.Context) {
	if r.DrainTimeout <= 0 {
		return
	}
	r.draining.Store(true)
	select {
	case r.renewNow <- struct{}{}:
	default:
	}
	r.Log.Info("draining: the sessions here move to other runners between their turns", "timeout", r.DrainTimeout)
	ctx, cancel := context.WithTimeout(life, r.DrainTimeout)
	defer cancel()
	r.serve(ctx, life, func() bool { return r.cache.Load()[r.Name] == 0 })
	if n := r.cache.Load()[r.Name]; n > 0 {
		r.Log.Warn("drain timed out: the sessions still here are stopped and resume elsewhere", "sessions", n)
	}
}

// keepLease renews the lease every third of its TTL until ctx ends.
func (r *Runner) keepLease(ctx context.Context) {
	t := time.NewTicker(r.Store.TTL / 3)
	defer t.Stop()
	var rev uint64
	for {
		rev = r.renew(ctx, rev)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.renewNow:
		}
	}
}

// leave stops the sidecars and gives the lease up.
func (r *Runner) leave() {
	_ = r.Launcher.Close()
	ctx, cancel := context.WithTimeout(context.Background(), kvTimeout)
	defer cancel()
	if err := r.Store.Leave(ctx, r.Name); err != nil {
		r.Log.Warn("lease not given up: it lapses by itself", "error", err)
	}
}

// renew writes the lease over the revision rev of the last renewal and
// returns the new one; a drain asked for since is kept.
func (r *Runner) renew(ctx context.Context, rev uint64) uint64 {
	l := Lease{Name: r.Name, Capacity: r.Capacity, Draining: r.draining.Load(), Sessions: len(r.Launcher.Running())}
	l, next, err := r.Store.RenewOver(ctx, l, rev)
	if err != nil {
		if ctx.Err() == nil {
			r.Log.Warn("lease not renewed", "error", err)
		}
		return rev
	}
	if l.Draining && !r.draining.Swap(true) {
		r.Log.Info("draining: no session is placed here any more")
	}
	return next
}

// apply brings the sidecars in line with the assignments: it starts those
// assigned here, stops those assigned elsewhere or no more, and reports
// those that exited.
func (r *Runner) apply(ctx context.Context) {
	all := r.cache.All()
	exited, err := r.Launcher.Exited(ctx)
	if err != nil {
		r.Log.Warn("sidecars not compared with their assignments", "error", err)
		return
	}
	for id := range r.gens {
		if _, ok := all[id]; !ok {
			delete(r.gens, id) // its session is over: a later run starts afresh
		}
	}
	for _, h := range r.Launcher.Running() {
		if p, ok := all[h.SessionID]; !ok || p.Runner != r.Name {
			r.stop(h.SessionID, p)
		}
	}
	done := map[string]bool{}
	for _, id := range exited {
		done[id] = true
		p, ok := all[id]
		gen, known := r.gens[id]
		switch {
		case !ok || p.Runner != r.Name:
			r.forget(ctx, id)
		case p.Exited:
			// It waits for the placer.
		case !known || gen == p.Gen:
			r.reportExit(ctx, p)
		default:
			r.run(ctx, p) // the placer asked for another since
		}
	}
	for id, p := range all {
		if p.Runner == r.Name && !p.Exited && !done[id] {
			r.run(ctx, p)
		}
	}
}

// stop ends a sidecar whose session is over or runs elsewhere now.
func (r *Runner) stop(id string, p Placed) {
	r.Log.Info("stopping a sidecar no longer assigned here", "session_id", id, "assigned_to", p.Runner)
	if err := r.Launcher.Stop(id); err != nil && !errors.Is(err, launcher.ErrNotRunning) {
		r.Log.Warn("sidecar not stopped", "session_id", id, "error", err)
	}
	delete(r.gens, id)
}

func (r *Runner) forget(ctx context.Context, id string) {
	if err := r.Launcher.Forget(ctx, id); err != nil {
		r.Log.Warn("record of a sidecar not dropped", "session_id", id, "error", err)
	}
	delete(r.gens, id)
}

// reportExit tells the placer that the session's sidecar exited without
// ending it: the placer asks for another one, resuming its agent.
func (r *Runner) reportExit(ctx context.Context, p Placed) {
	a := p.Assignment
	a.Exited = true
	rev, err := r.Store.Put(ctx, a, p.Revision)
	if err != nil {
		if !Conflict(err) && ctx.Err() == nil {
			r.Log.Warn("exit of a sidecar not reported", "session_id", a.SessionID, "error", err)
		}
		return
	}
	r.cache.Note(a, rev)
	r.gens[a.SessionID] = a.Gen
}

// run starts the sidecar of an assignment once: one that exits is
// reported, and the placer asks for another. A sidecar of an older
// generation is stopped first.
func (r *Runner) run(ctx context.Context, p Placed) {
	id := p.SessionID
	gen, known := r.gens[id]
	if known && gen == p.Gen {
		return // started once: its exit is reported, never started again
	}
	if _, running := r.Launcher.PID(id); running {
		if !known {
			r.gens[id] = p.Gen // an adopted sidecar serves the assignment it was started for
			return
		}
		r.stop(id, p)
	}
	var cfg protocol.Config
	if err := json.Unmarshal(p.Config, &cfg); err != nil {
		r.Log.Error("assignment with an unreadable config", "session_id", id, "error", err)
		return
	}
	_, err := r.Launcher.StartSession(ctx, cfg, p.APIKey,
		launcher.WithLimits(p.MaxProcesses, p.MaxMemory), launcher.WithRedisURL(p.RedisURL))
	switch {
	case err == nil:
		r.gens[id] = p.Gen
	case errors.Is(err, launcher.ErrClosed):
	default:
		r.Log.Error("sidecar not started", "session_id", id, "error", err)
		r.reportExit(ctx, p)
	}
}
