package runners

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/agentbus/agentbus/sidecar/launcher"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// Runner runs the sidecars of the sessions assigned to it, with its
// launcher, and keeps its lease while it runs. It needs NATS and Redis
// only: what a sidecar starts with comes in its assignment.
type Runner struct {
	// Name identifies the runner; it is also its launcher's name.
	Name string
	// Capacity is how many sidecars it runs at most.
	Capacity int
	Store    *Store
	// Launcher starts the sidecars (Config.PlacedRedisUsers set); Run
	// starts and closes it.
	Launcher *launcher.Launcher
	// Drain, when it is closed, asks the runner to take no more sessions.
	Drain <-chan struct{}
	Log   *slog.Logger

	cache    *Cache
	gens     map[string]uint64
	draining bool
}

// Run keeps the lease and the sidecars until ctx ends; then it stops its
// sidecars and gives its lease up, so its sessions go elsewhere at once.
func (r *Runner) Run(ctx context.Context) error {
	if r.Log == nil {
		r.Log = slog.Default()
	}
	r.Log = r.Log.With("component", "runner", "runner", r.Name)
	if err := r.Launcher.Start(ctx); err != nil {
		return err
	}
	cache, err := r.Store.Watch(ctx)
	if err != nil {
		return err
	}
	r.cache, r.gens = cache, map[string]uint64{}
	defer r.leave()
	// The lease is renewed apart from the work on the sidecars, which may
	// take a while (a sidecar's stop waits for it to exit).
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		r.keepLease(ctx)
	}()
	defer func() { <-renewed }()
	resync := time.NewTicker(r.Store.TTL / 3)
	defer resync.Stop()
	for {
		r.apply(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-resync.C:
		case <-cache.Changed():
		case <-r.Launcher.Exits():
		}
	}
}

// keepLease renews the lease every third of its TTL until ctx ends.
func (r *Runner) keepLease(ctx context.Context) {
	t := time.NewTicker(r.Store.TTL / 3)
	defer t.Stop()
	for {
		r.renew(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.Drain:
			r.draining, r.Drain = true, nil
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

func (r *Runner) renew(ctx context.Context) {
	l := Lease{Name: r.Name, Capacity: r.Capacity, Draining: r.draining, Sessions: len(r.Launcher.Running())}
	if err := r.Store.Renew(ctx, l); err != nil && ctx.Err() == nil {
		r.Log.Warn("lease not renewed", "error", err)
	}
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
