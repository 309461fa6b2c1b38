// Package sidecar runs one agent session: it starts the session's engine,
// writes its raw events to agent:session:{<id>} and, concurrently, reads
// and carries out the commands of agent:session:{<id>}:commands
// (DESIGN.md §3). README.md documents every event and command.
//
// One loop drives the engine turn by turn. Between turns it applies config
// reloads, holds while paused, and picks the next input: Immediate steering
// messages first, then Queued ones in order, then the agent's own next
// turn. Commands cut a running turn short by cancelling its context with a
// cause (interrupt, Immediate steering, stop, context exhaustion), and
// everything the loop and the command reader share is guarded by one mutex.
package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentbus/agentbus/sidecar/engine"
	"github.com/agentbus/agentbus/sidecar/engine/claude"
	"github.com/agentbus/agentbus/sidecar/engine/script"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// Options configure Run.
type Options struct {
	// SessionID is the session. Required.
	SessionID string
	// Config is the composed config; Run sets its defaults.
	Config protocol.Config
	// Redis holds the session's streams. Required.
	Redis *redis.Client
	// Engines are the engines a config may name. Default: the script and
	// claude engines.
	Engines engine.Registry
	// API is handed to the engine for the agent API.
	API engine.AgentAPI
	// Logger receives the sidecar's log. Default slog.Default().
	Logger *slog.Logger
	// CommandBlock is how long one read of the command stream blocks; it
	// bounds how long the reader takes to notice the session ended, not how
	// fast commands arrive. Default 1s.
	CommandBlock time.Duration
	// WriteTimeout is how long writing one event may keep failing before
	// the sidecar gives up. Default 1m.
	WriteTimeout time.Duration
}

func (o *Options) setDefaults() {
	o.Config.SetDefaults()
	if o.Engines == nil {
		o.Engines = engine.Registry{script.Name: script.New(), claude.Name: claude.New()}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.CommandBlock <= 0 {
		o.CommandBlock = time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = time.Minute
	}
}

// Validate reports options Run cannot work with.
func (o Options) Validate() error {
	switch {
	case !protocol.ValidSessionID(o.SessionID):
		return fmt.Errorf("sidecar: session id %q may hold only a-z, 0-9, '-' and '_'", o.SessionID)
	case o.Redis == nil:
		return errors.New("sidecar: Options.Redis is required")
	case o.Config.SessionID != "" && o.Config.SessionID != o.SessionID:
		return fmt.Errorf("sidecar: config is for session %q, not %q", o.Config.SessionID, o.SessionID)
	}
	return nil
}

// Causes with which a running turn is cut short.
var (
	errInterrupted = errors.New("interrupted")
	errSteered     = errors.New("immediate steering message")
	errStopped     = errors.New("stopped")
	errExhausted   = errors.New("context window exhausted")
	errSuspended   = errors.New("suspended by a signal")
)

// ErrSuspended is returned by Run when a signal (ctx) stopped the sidecar
// before its session ended: it wrote no session_end, so the session goes
// on, and the sidecar started for it next resumes the agent.
var ErrSuspended = errors.New("sidecar: suspended before the session ended")

// Run runs the session until it ends and returns its session_end. A
// cancelled ctx (SIGTERM) suspends the sidecar: the agent's turn is cut
// short, its engine closed, and Run returns ErrSuspended without writing
// session_end, because the session is not over: its runtime starts a
// sidecar again, which resumes the agent. Run returns another error only
// when the options are invalid or the session_end could not be written.
func Run(ctx context.Context, opts Options) (protocol.SessionEnd, error) {
	opts.setDefaults()
	if err := opts.Validate(); err != nil {
		return protocol.SessionEnd{}, err
	}
	r := newRunner(opts)
	base := context.WithoutCancel(ctx)

	cursor, restarted, err := r.loadCursor(base)
	if err != nil {
		return r.endEarly(protocol.ReasonConfigError, fmt.Errorf("read the command cursor: %w", err))
	}
	if err := r.startEngine(base, opts, restarted); err != nil {
		return r.endEarly(protocol.ReasonConfigError, err)
	}
	r.takeUpInbox(base)
	r.drive(ctx, base, cursor)
	return r.result()
}

// startEngine starts the session's engine and says so in session_started.
func (r *runner) startEngine(ctx context.Context, opts Options, restarted bool) error {
	if err := opts.Config.Validate(); err != nil {
		return err
	}
	eng, err := opts.Engines.Get(opts.Config.Engine)
	if err != nil {
		return err
	}
	sess, err := eng.Start(ctx, engine.Setup{SessionID: r.id, Config: opts.Config, API: opts.API}, r)
	if err != nil {
		return fmt.Errorf("start the %s engine: %w", opts.Config.Engine, err)
	}
	r.sess = sess
	if err := r.rdb.Set(ctx, protocol.EngineKey(r.id), sess.ID(), 0).Err(); err != nil {
		r.log.Warn("engine session id not stored: a restart cannot resume the agent", "error", err)
	}
	r.emitLog(protocol.SessionStarted{
		Engine: opts.Config.Engine, EngineSessionID: sess.ID(), Model: sess.Model(),
		WorkingDirectory: opts.Config.WorkingDirectory, Resumed: opts.Config.ResumeEngineSessionID != "",
		Restarted: restarted, PID: os.Getpid(),
	})
	r.log.Info("session started", "engine", opts.Config.Engine, "engine_session_id", sess.ID(), "restarted", restarted)
	return nil
}

// takeUpInbox handles first what a predecessor took and did not answer.
func (r *runner) takeUpInbox(ctx context.Context) {
	left, err := r.loadInbox(ctx)
	if err != nil {
		r.log.Error("commands a predecessor took are not taken up", "error", err)
	}
	for _, m := range left {
		r.log.Info("command taken up from a predecessor", "entry_id", m.ID)
		r.handle(m)
	}
}

// drive reads the commands from cursor on and runs the loop until the
// session ends, a stop is forced, or ctx ends (a suspension), then closes
// the engine's session.
func (r *runner) drive(ctx, base context.Context, cursor string) {
	readCtx, stopReading := context.WithCancel(base)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		r.readCommands(readCtx, cursor)
	}()
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		r.loop(base)
	}()
	select {
	case <-loopDone:
	case <-r.forced:
		r.log.Warn("agent did not stop within the timeout; abandoned")
	case <-ctx.Done():
		// A signal gives the sidecar 2 s to exit: the turn is cut short and
		// nothing waits for a Redis that may be gone with the runtime.
		r.suspend()
		r.out.abandon()
		select {
		case <-loopDone:
		case <-time.After(suspendGrace):
			r.log.Warn("agent did not stop within the grace; abandoned")
		}
	}
	stopReading()
	<-readDone
	if r.isSuspended() {
		r.closeSessionWithin(suspendGrace)
	} else {
		r.closeSession()
	}
}

// result is what Run returns once the session is driven: its session_end,
// or ErrSuspended when it goes on elsewhere.
func (r *runner) result() (protocol.SessionEnd, error) {
	end, ok := r.out.final()
	if !ok && r.isSuspended() {
		r.log.Info("sidecar suspended; the session goes on")
		return end, ErrSuspended
	}
	if !ok {
		return end, errors.New("sidecar: the session ended without a session_end")
	}
	r.mu.Lock()
	endErr := r.endErr
	r.mu.Unlock()
	if endErr != nil {
		return end, endErr
	}
	r.log.Info("session ended", "status", end.Status, "reason", end.Reason)
	return end, nil
}

// runner is one session's sidecar. Fields below mu are shared by the loop,
// the command reader and the engine's calls into the Host.
type runner struct {
	id        string
	opts      Options
	log       *slog.Logger
	rdb       *redis.Client
	out       *emitter
	inbox     *inbox
	start     time.Time
	sess      engine.Session
	forced    chan struct{}
	force     sync.Once
	mu        sync.Mutex
	endErr    error // why the final events could not be written
	cfg       protocol.Config
	changed   chan struct{} // closed and replaced on every change the loop waits for
	closing   bool          // the session is ending: handle no more commands
	suspended bool          // a signal stopped the sidecar; the session goes on

	turnCancel context.CancelCauseFunc // set while a turn runs
	waiting    int                     // engine calls waiting for a person
	more       bool                    // the agent has work of its own left

	immediate, queued []protocol.SteeringMessage
	seen              map[string]bool // steering message ids already taken

	interrupted   bool     // no own work until a message arrives
	interruptAcks []string // interrupts of the running turn, acked when it ends
	paused        bool
	pauseAcks     []string // pauses not yet acknowledged
	// heldTurnEnd is the turn_completed of a turn that ended while a pause
	// waited (an engine that holds only before a tool call finishes the
	// turn): written once the session is resumed, so that it ends the turn
	// of a Running session rather than arrive while it is Pausing.
	heldTurnEnd *protocol.TurnCompleted
	// lastTurnEnd is the turn_completed last written, which a pause that
	// finds no turn running writes again (see onPause).
	lastTurnEnd *protocol.TurnCompleted
	stop        *stopRequest
	reloads     []reloadRequest

	questions map[string]chan string
	plans     map[string]chan engine.PlanDecision
	perms     map[string]chan engine.Permission

	turnCost, totalCost     float64
	turns                   int
	warned, exhausted       bool
	contextUsed, contextMax int64
	handoff                 *protocol.VoluntaryHandoff
}

type stopRequest struct {
	commandIDs []string
	timer      *time.Timer
}

type reloadRequest struct {
	commandID string
	entryID   string
	cfg       protocol.Config
}

func newRunner(opts Options) *runner {
	return &runner{
		id:        opts.SessionID,
		opts:      opts,
		log:       opts.Logger,
		rdb:       opts.Redis,
		out:       &emitter{rdb: opts.Redis, key: protocol.EventsKey(opts.SessionID), timeout: opts.WriteTimeout, quit: make(chan struct{})},
		inbox:     newInbox(opts.Redis, opts.SessionID, opts.Logger),
		start:     time.Now(),
		forced:    make(chan struct{}),
		cfg:       opts.Config,
		changed:   make(chan struct{}),
		more:      true,
		seen:      map[string]bool{},
		questions: map[string]chan string{},
		plans:     map[string]chan engine.PlanDecision{},
		perms:     map[string]chan engine.Permission{},
		// A session paused when its sidecar was replaced stays paused
		// until it is resumed.
		paused: opts.Config.StartPaused && opts.Config.ResumeEngineSessionID != "",
	}
}

// notifyLocked wakes everything waiting for a change.
func (r *runner) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *runner) config() protocol.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cfg
}

// loadCursor reads the id of the last command entry handled, and whether a
// predecessor left one (the sidecar is a restart).
func (r *runner) loadCursor(ctx context.Context) (cursor string, restarted bool, err error) {
	err = r.retryRead(func() error {
		cursor, err = r.rdb.Get(ctx, protocol.CursorKey(r.id)).Result()
		return err
	})
	switch {
	case errors.Is(err, redis.Nil):
		return "0", false, nil
	case err != nil:
		return "", false, err
	}
	return cursor, true, nil
}

// loadInbox reads the command entries a predecessor took and did not
// answer (see inbox.load).
func (r *runner) loadInbox(ctx context.Context) (left []redis.XMessage, err error) {
	err = r.retryRead(func() error {
		left, err = r.inbox.load(ctx, protocol.EventsKey(r.id))
		return err
	})
	return left, err
}

// retryRead runs read, a read of what the session's predecessor left,
// again while it fails for up to WriteTimeout, as a write is retried: a
// Redis that is restarting refuses connections, and one restarted without
// the session's ACL user refuses the sidecar's credentials (WRONGPASS)
// until the launcher restores the user. Neither may end the session, or
// lose what a predecessor took. redis.Nil is an answer, not a failure.
func (r *runner) retryRead(read func() error) error {
	deadline := time.Now().Add(r.opts.WriteTimeout)
	backoff := 50 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := read()
		if err == nil || errors.Is(err, redis.Nil) || time.Now().Add(backoff).After(deadline) {
			return err
		}
		if attempt == 0 {
			r.log.Warn("reading what the predecessor left failed, retrying", "error", err)
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 2*time.Second)
	}
}

// emitAnswer writes the answer to a command entry of the inbox and, once
// it is written, drops the entry.
func (r *runner) emitAnswer(ev protocol.Event, answer string) {
	if err := r.out.emit(ev); err != nil {
		if !errors.Is(err, ErrSessionEnded) {
			r.log.Error("event not written", "type", ev.EventType(), "error", err)
		}
		return
	}
	r.inbox.answered(answer)
}

// emitLog writes an event the sidecar owns, logging a failure: the session
// goes on, and a lost event shows in the log.
func (r *runner) emitLog(ev protocol.Event) {
	if err := r.out.emit(ev); err != nil && !errors.Is(err, ErrSessionEnded) {
		r.log.Error("event not written", "type", ev.EventType(), "error", err)
	}
}

// endEarly ends a session that never started its engine.
func (r *runner) endEarly(reason string, cause error) (protocol.SessionEnd, error) {
	r.log.Error("session cannot start", "error", cause)
	end := r.sessionEnd(protocol.StatusError, reason, cause)
	if _, err := r.out.finish(end); err != nil {
		return end, err
	}
	return end, nil
}

// sessionEnd builds a session_end with the session's totals.
func (r *runner) sessionEnd(status, reason string, cause error) protocol.SessionEnd {
	r.mu.Lock()
	defer r.mu.Unlock()
	end := protocol.SessionEnd{
		Status: status, Reason: reason,
		NumTurns: r.turns, TotalCostUSD: roundCost(r.totalCost),
		DurationMS: time.Since(r.start).Milliseconds(),
	}
	if status == protocol.StatusError {
		end.ExitCode = engine.ExitCodeOf(cause)
		end.FailureReason = protocol.FailureAgentError
		if reason == protocol.ReasonConfigError || reason == protocol.ReasonTerminated {
			end.FailureReason = protocol.FailureInfrastructureError
		}
		if cause != nil {
			end.Error = cause.Error()
		}
	}
	return end
}

// finish writes the final events; only the first caller's are written. It
// reports whether this call wrote them.
func (r *runner) finish(end protocol.SessionEnd, before ...protocol.Event) bool {
	r.mu.Lock()
	r.closing = true
	r.notifyLocked()
	r.mu.Unlock()
	wrote, err := r.out.finish(end, before...)
	if wrote && err != nil {
		r.mu.Lock()
		r.endErr = err
		r.mu.Unlock()
		r.log.Error("final events not written", "error", err)
	}
	return wrote
}

// suspendGrace bounds each step of a suspension: the turn's end, then the
// engine's close.
const suspendGrace = 800 * time.Millisecond

func (r *runner) closeSession() { r.closeSessionWithin(5 * time.Second) }

// closeSessionWithin closes the engine's session, waiting at most d.
func (r *runner) closeSessionWithin(d time.Duration) {
	if r.sess == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.sess.Close(); err != nil {
			r.log.Warn("engine session close", "error", err)
		}
	}()
	select {
	case <-done:
	case <-time.After(d):
		r.log.Warn("engine session did not close in time", "waited", d)
	}
}

func roundCost(c float64) float64 { return math.Round(c*1e6) / 1e6 }
