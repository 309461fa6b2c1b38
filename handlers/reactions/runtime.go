package reactions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/postgres/queries"
	"github.com/agentbus/agentbus/relay"
	"github.com/agentbus/agentbus/sidecar/launcher"
	"github.com/agentbus/agentbus/sidecar/protocol"
	"github.com/agentbus/agentbus/sidecar/workspace"
)

// RuntimeConsumer is the durable consumer of the runtime reaction.
// Renaming it replays every event to it: keep it stable.
const RuntimeConsumer = "runtime"

// DefaultReconcileInterval is how often the runtime compares the sidecars
// it runs with the sessions that need one.
const DefaultReconcileInterval = 2 * time.Second

// Runtime is the seed's IAgentRuntime. It keeps exactly one live sidecar
// for every session that holds a pool slot and is not over, and none for a
// session that is over:
//   - when a session gets a pool slot it has the relay carry the session's
//     streams and starts its sidecar, which stays while the session is Idle
//     or Interrupted, waiting for the next message;
//   - a sidecar that exited without ending its session (a crash, kill -9,
//     a restart of the runtime) is started again, resuming its engine's
//     conversation, so a follow-up still reaches an agent that has its
//     context;
//   - when the session ends it stops the sidecar and lets the relay drain;
//   - a cancel that no sidecar can acknowledge (none runs) is confirmed
//     here, so no session waits for an ack that cannot come.
//
// With Placement set, the sidecars run on runners (package runners): the
// runtime assigns each session to a live runner with room, and again
// elsewhere when that runner's lease lapses, and composes what the runner
// starts its sidecar with; Launcher then starts nothing here.
//
// In external mode the launcher starts nothing and someone else runs the
// sidecars; the runtime then only activates and deactivates the relay.
type Runtime struct {
	JS       jetstream.JetStream
	DB       *pgxpool.Pool
	Redis    *redis.Client
	Launcher *launcher.Launcher
	// Client issues each sidecar its agent API key (IssueSidecarKey).
	Client *command.Client
	// Engine is the sidecar engine: script (default) or claude.
	Engine string
	// Workspace is the root every session's working directory lies in,
	// under its owner's directory; checked again before each start, since
	// a symlink may have appeared since the API checked it.
	Workspace workspace.Root
	// ReconcileInterval is how often the sidecars are compared with the
	// sessions; zero means DefaultReconcileInterval.
	ReconcileInterval time.Duration
	// Placement, when set, places the sessions on runners.
	Placement *Placement

	locks *sessionLocks
}

// Run consumes the allocation and ending events and reconciles the
// sidecars until ctx ends; then it stops every sidecar it runs, which the
// next run starts again.
func (r Runtime) Run(ctx context.Context) error {
	if r.Placement != nil {
		if err := r.Placement.start(ctx); err != nil {
			return err
		}
	} else {
		if err := r.Launcher.Start(ctx); err != nil {
			return err
		}
		defer r.Launcher.Close()
	}
	r.locks = &sessionLocks{held: map[uuid.UUID]*sessionLock{}}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.reconcileLoop(ctx)
	}()
	defer wg.Wait()
	return bus.Run(ctx, r.JS, bus.RunnerConfig{
		Stream: bus.StreamEvents, Consumer: RuntimeConsumer, Handler: r.Handle,
		Concurrency: 4, OrderKey: bus.BySubject,
		FilterSubjects: []string{bus.EventFilter(domain.SessionAllocatedEvent{}), bus.EventFilter(domain.SessionReleasedEvent{}),
			bus.EventFilter(domain.SessionCancelRequestedEvent{}), bus.EventFilter(domain.SessionRewoundEvent{})},
	})
}

// Handle starts, stops or stands in for one session's sidecar.
func (r Runtime) Handle(ctx context.Context, m jetstream.Msg) error {
	env, id, err := decodeEvent(m)
	if err != nil {
		return err
	}
	switch env.Type {
	case domain.SessionReleasedEvent{}.EventType():
		return r.release(ctx, id)
	case domain.SessionCancelRequestedEvent{}.EventType():
		return r.confirmCancelIfNoSidecar(ctx, env, id)
	case domain.SessionRewoundEvent{}.EventType():
		return r.rewind(ctx, env, id)
	}
	return r.ensure(ctx, id, false)
}

// ensure starts the session's sidecar unless it runs or the session does
// not need one; resume continues the engine's conversation of the
// sidecar that ran it before.
func (r Runtime) ensure(ctx context.Context, id uuid.UUID, resume bool) error {
	unlock := r.locks.lock(id)
	defer unlock()
	s, err := postgres.Sessions{}.Get(ctx, r.DB, id)
	if errors.Is(err, postgres.ErrNotFound) {
		return bus.Permanent(err)
	}
	if err != nil {
		return err
	}
	if !s.Status().HasSidecar() {
		// It ended before its sidecar (re)started.
		if r.Placement != nil {
			return r.releasePlaced(ctx, id.String())
		}
		return r.Launcher.Forget(ctx, id.String())
	}
	kv, err := relay.SessionsKV(ctx, r.JS)
	if err != nil {
		return err
	}
	if err := relay.Activate(ctx, kv, id.String()); err != nil {
		return err
	}
	if r.Placement != nil {
		return r.ensurePlaced(ctx, s)
	}
	if attempt, running := r.Launcher.Attempt(id.String()); running {
		if attempt >= s.RetryCount() {
			return nil // a redelivered allocation
		}
		// A retry started the session's next run before the release of
		// the run it failed reached here: that run's sidecar goes, and the
		// new run gets a sidecar of its own.
		slog.Info("stopping the sidecar of an earlier run", "component", "runtime", "session_id", id,
			"attempt", attempt, "current", s.RetryCount())
		if err := r.Launcher.Stop(id.String()); err != nil && !errors.Is(err, launcher.ErrNotRunning) {
			return err
		}
	}
	cfg, key, limits, ok, err := r.prepareStart(ctx, s, resume)
	if err != nil || !ok {
		return err
	}
	_, err = r.Launcher.StartSession(ctx, cfg, key, launcher.WithLimits(limits.processes, limits.memory))
	if errors.Is(err, launcher.ErrClosed) {
		return nil // shutting down: the next run starts it
	}
	return err
}

// prepareStart composes the config a sidecar of the session starts with,
// prepares its working directory and issues its key; ok is false when it
// is not to start (the session ended meanwhile, its agent runs on another
// engine, or its working directory is refused, which fails the session).
func (r Runtime) prepareStart(ctx context.Context, s *domain.AgentSession, resume bool) (
	cfg protocol.Config, key string, limits limitValues, ok bool, err error) {
	id := s.ID()
	if cfg, err = sidecarConfig(ctx, r.DB, s, r.Engine); err != nil {
		return cfg, "", limits, false, err
	}
	if resume {
		if err = r.resumeConfig(ctx, id, &cfg); err != nil {
			return cfg, "", limits, false, err
		}
	}
	if r.Placement != nil || r.Launcher.Process() {
		if err := r.Workspace.Check(s.OwnerID(), cfg.WorkingDirectory); err != nil {
			_, err := doDerived(ctx, r.Client, "runtime", id.String()+"/workspace/"+cfg.WorkingDirectory,
				domain.AggregateSession, command.RecordFailure, id, "",
				command.FailureData{Reason: domain.FailureInfrastructureError, Message: "the working directory " + err.Error()})
			return cfg, "", limits, false, err
		}
		if err := r.startFork(ctx, s, &cfg); err != nil {
			return cfg, "", limits, false, err
		}
		// The session's directory is created on demand.
		if err := os.MkdirAll(cfg.WorkingDirectory, 0o755); err != nil {
			return cfg, "", limits, false, fmt.Errorf("working directory of %s: %w", id, err)
		}
	}
	key, err = r.sidecarKey(ctx, id)
	if err != nil || key == "" {
		return cfg, "", limits, false, err
	}
	limits, err = r.sandboxLimitValues(ctx, s)
	return cfg, key, limits, err == nil, err
}

// resumeConfig has the sidecar continue the engine's conversation of the
// one that ran the session before, numbering its checkpoints on.
func (r Runtime) resumeConfig(ctx context.Context, id uuid.UUID, cfg *protocol.Config) error {
	engineID, err := r.Redis.Get(ctx, protocol.EngineKey(id.String())).Result()
	switch {
	case err == nil:
		cfg.ResumeEngineSessionID = engineID
	case !errors.Is(err, redis.Nil):
		return err
	}
	cfg.TurnsBefore, err = r.turnsBefore(ctx, id)
	return err
}

// limitValues are the limits of a sidecar's sandbox; zero keeps the
// launcher's.
type limitValues struct {
	processes int
	memory    int64
}

// sandboxLimits returns the limits of the session's sandbox that its
// template sets, read at each start: a template changed since applies to
// the next start of the sidecar.
func (r Runtime) sandboxLimits(ctx context.Context, s *domain.AgentSession) (launcher.StartOption, error) {
	l, err := r.sandboxLimitValues(ctx, s)
	if err != nil {
		return nil, err
	}
	return launcher.WithLimits(l.processes, l.memory), nil
}

// sandboxLimitValues returns the limits of the session's sandbox that its
// template sets.
func (r Runtime) sandboxLimitValues(ctx context.Context, s *domain.AgentSession) (limitValues, error) {
	id := s.TemplateID()
	if id == nil {
		return limitValues{}, nil
	}
	t, err := postgres.Templates{}.Get(ctx, r.DB, *id)
	if errors.Is(err, postgres.ErrNotFound) {
		return limitValues{}, nil
	}
	if err != nil {
		return limitValues{}, err
	}
	l := t.SandboxLimits()
	return limitValues{processes: l.MaxProcesses, memory: l.MaxMemoryMiB << 20}, nil
}

// release stops the sidecar of a session that ended and lets the relay
// drain its streams. A release that arrives once a retry made the session
// live again is of the run that ended: the session's next run keeps its
// relay, and its sidecar (ensure replaces the earlier run's). The lock is
// held throughout, so a drain never follows the next run's activation.
func (r Runtime) release(ctx context.Context, id uuid.UUID) error {
	unlock := r.locks.lock(id)
	defer unlock()
	s, err := postgres.Sessions{}.Get(ctx, r.DB, id)
	switch {
	case err == nil && s.Status().HasSidecar():
		slog.Info("release of an earlier run ignored: the session runs again", "component", "runtime", "session_id", id,
			"status", s.Status())
		return nil
	case err != nil && !errors.Is(err, postgres.ErrNotFound):
		return err
	}
	if err := r.stopSidecar(ctx, id); err != nil {
		return err
	}
	kv, err := relay.SessionsKV(ctx, r.JS)
	if err != nil {
		return err
	}
	return relay.Deactivate(ctx, kv, id.String())
}

// stopSidecar stops the sidecar of a session that is over and forgets it.
func (r Runtime) stopSidecar(ctx context.Context, id uuid.UUID) error {
	if r.Placement != nil {
		return r.releasePlaced(ctx, id.String())
	}
	err := r.Launcher.Stop(id.String())
	if errors.Is(err, launcher.ErrNotRunning) {
		err = r.Launcher.Forget(ctx, id.String())
	}
	return err
}

// confirmCancelIfNoSidecar confirms the cancel of a session that no
// sidecar runs and none will run again: nothing else could acknowledge
// its stop. In external mode the sidecar is not ours to know of.
func (r Runtime) confirmCancelIfNoSidecar(ctx context.Context, env bus.Envelope, id uuid.UUID) error {
	if r.Placement == nil && !r.Launcher.Process() {
		return nil
	}
	running, err := r.hasSidecar(ctx, id)
	if err != nil {
		return err
	}
	if running {
		return nil // its sidecar acknowledges the stop, now or once started again
	}
	// It confirms the stop the session awaits, as its ack would have.
	var e domain.SessionCancelRequestedEvent
	if err := json.Unmarshal(env.Data, &e); err != nil {
		return bus.Permanent(err)
	}
	_, err = doDerived(ctx, r.Client, "runtime", env.ID+"/"+command.ConfirmCancelled,
		domain.AggregateSession, command.ConfirmCancelled, id, "", command.AckData{CommandID: e.CommandID})
	return err
}

// hasSidecar reports whether a sidecar runs the session, or will run
// again.
func (r Runtime) hasSidecar(ctx context.Context, id uuid.UUID) (bool, error) {
	unlock := r.locks.lock(id)
	defer unlock()
	if r.Placement != nil {
		return r.hasSidecarPlaced(ctx, id.String())
	}
	_, running := r.Launcher.PID(id.String())
	exited, err := r.Launcher.Exited(ctx)
	return running || slices.Contains(exited, id.String()), err
}

// reconcileLoop starts again the sidecars that exited without ending their
// session and stops those whose session is over, at every interval and as
// soon as a sidecar exits.
func (r Runtime) reconcileLoop(ctx context.Context) {
	every := r.ReconcileInterval
	if every <= 0 {
		every = DefaultReconcileInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	reconcile, wake := r.reconcile, r.Launcher.Exits()
	if r.Placement != nil {
		reconcile, wake = r.reconcilePlaced, r.Placement.cache.Changed()
	}
	for {
		if err := reconcile(ctx); err != nil && ctx.Err() == nil {
			slog.Warn("sidecars not reconciled", "component", "runtime", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
	}
}

func (r Runtime) reconcile(ctx context.Context) error {
	exited, err := r.Launcher.Exited(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range exited {
		id, err := uuid.Parse(s)
		if err != nil {
			errs = append(errs, r.Launcher.Forget(ctx, s))
			continue
		}
		if err := r.ensure(ctx, id, true); err != nil {
			errs = append(errs, fmt.Errorf("start the sidecar of %s again: %w", id, err))
		}
	}
	running := r.Launcher.Running()
	ids := make([]uuid.UUID, 0, len(running))
	for _, h := range running {
		if id, err := uuid.Parse(h.SessionID); err == nil {
			ids = append(ids, id)
		}
	}
	statuses, err := queries.SessionStatuses(ctx, r.DB, ids)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, id := range ids {
		if st, ok := statuses[id]; !ok || !st.HasSidecar() {
			slog.Info("stopping the sidecar of a session that is over", "component", "runtime", "session_id", id, "status", st)
			if err := r.release(ctx, id); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// sidecarKey issues a new agent API key for the sidecar about to start,
// or returns "" when the session ended meanwhile. A fresh command id each
// time: the key is only in the live reply, and a sidecar started again
// gets a new key, which retires the old one.
func (r Runtime) sidecarKey(ctx context.Context, id uuid.UUID) (string, error) {
	cmd, err := command.New(domain.AggregateSession, command.IssueSidecarKey, id, "", command.IssueSidecarKeyData{Engine: r.engine()})
	if err != nil {
		return "", bus.Permanent(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := r.Client.Do(ctx, cmd)
	if err != nil {
		return "", fmt.Errorf("issue sidecar key of %s: %w", id, err)
	}
	if err := res.Err(); err != nil {
		if strings.Contains(err.Error(), domain.ErrEngineMismatch.Error()) {
			// The session waits for a runtime of its engine; say so once.
			if _, said := r.locks.told.LoadOrStore(id, true); !said {
				slog.Warn("session not started: its agent runs on another engine; it waits for a runtime of that engine",
					"component", "runtime", "session_id", id, "engine", r.engine(), "error", err)
			}
		}
		return "", nil
	}
	var out command.IssueSidecarKeyResult
	if err := json.Unmarshal(res.State, &out); err != nil || out.APIKey == "" {
		return "", fmt.Errorf("issue sidecar key of %s: no key in the reply", id)
	}
	return out.APIKey, nil
}

// engine returns the engine this runtime's sidecars run.
func (r Runtime) engine() string {
	if r.Engine == "" {
		return protocol.EngineScript
	}
	return r.Engine
}

// sessionLocks serialises what the runtime does for one session.
type sessionLocks struct {
	mu   sync.Mutex
	held map[uuid.UUID]*sessionLock
	// told are the sessions whose engine this runtime does not run, which
	// it said so for.
	told sync.Map
}

type sessionLock struct {
	sync.Mutex
	users int
}

// lock locks the session's mutex and returns its unlock; a mutex nobody
// holds or waits for is dropped.
func (l *sessionLocks) lock(id uuid.UUID) func() {
	l.mu.Lock()
	m, ok := l.held[id]
	if !ok {
		m = &sessionLock{}
		l.held[id] = m
	}
	m.users++
	l.mu.Unlock()
	m.Lock()
	return func() {
		m.Unlock()
		l.mu.Lock()
		if m.users--; m.users == 0 {
			delete(l.held, id)
		}
		l.mu.Unlock()
	}
}
