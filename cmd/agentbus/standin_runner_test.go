package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/agentbus/agentbus/sidecar/launcher"
	"github.com/agentbus/agentbus/sidecar/protocol"
	"github.com/agentbus/agentbus/sidecar/runners"
)

// standInRunnerCommand runs, in the test binary only, `agentbus runner`
// with stand-in sidecars (standInSidecars): the fleet benchmark's runners.
// No agentbus binary holds the stand-ins, so neither a configuration nor
// a call of the API reaches them.
const standInRunnerCommand = "bench-standin-runner"

// runStandInMain runs the command as main runs `agentbus runner`, and
// exits.
func runStandInMain(args []string) {
	slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel()})))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := runStandInRunner(ctx, args)
	stop()
	if err != nil {
		slog.Error("stand-in runner failed", "error", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runStandInRunner is `<test binary> bench-standin-runner <runner flags>`.
func runStandInRunner(ctx context.Context, args []string) error {
	return runRunnerWith(ctx, args, func(context.Context, *infra, string) (runners.Sidecars, error) {
		return &standInSidecars{log: slog.Default(), running: map[string]*standIn{}, exited: map[string]bool{},
			exits: make(chan struct{}, 1)}, nil
	})
}

// standInSidecars run each session's sidecar as a goroutine of the
// runner's process that speaks the sidecar's Redis contract
// (sidecar/README.md) for an engine that does nothing: session_started,
// one turn on the objective unless it resumes, then the commands. A
// thousand fit on one machine, where a thousand sidecar processes would
// not. A runner killed takes them along, as its sidecars die with it.
type standInSidecars struct {
	log     *slog.Logger
	mu      sync.Mutex
	running map[string]*standIn
	// exited are the sessions whose stand-in failed before its session
	// ended: the runner reports them, and the placer asks for another.
	exited map[string]bool
	closed bool
	exits  chan struct{}
}

// standIn is one running stand-in.
type standIn struct {
	cancel   context.CancelFunc
	done     chan struct{}
	stopping bool
}

var _ runners.Sidecars = (*standInSidecars)(nil)

func (s *standInSidecars) Start(context.Context) error { return nil }

func (s *standInSidecars) Close() error {
	s.mu.Lock()
	s.closed = true
	all := make([]*standIn, 0, len(s.running))
	for _, si := range s.running {
		all = append(all, si)
	}
	s.mu.Unlock()
	for _, si := range all {
		si.cancel()
		<-si.done
	}
	return nil
}

// StartSession starts the session's stand-in, connected to Redis as the
// session's own user, with the URL its placement handed over.
func (s *standInSidecars) StartSession(_ context.Context, cfg protocol.Config, _ string, opts ...launcher.StartOption) (launcher.Handle, error) {
	id := cfg.SessionID
	ropts, err := redis.ParseURL(launcher.RedisURLOf(opts...))
	if err != nil {
		return launcher.Handle{}, fmt.Errorf("stand-in of %s: %w", id, err)
	}
	ropts.PoolSize = 2
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return launcher.Handle{}, launcher.ErrClosed
	case s.running[id] != nil:
		return launcher.Handle{}, launcher.ErrAlreadyRunning
	}
	ctx, cancel := context.WithCancel(context.Background())
	si := &standIn{cancel: cancel, done: make(chan struct{})}
	s.running[id] = si
	delete(s.exited, id)
	go s.serve(ctx, si, cfg, redis.NewClient(ropts))
	return launcher.Handle{SessionID: id, RuntimeJobID: "standin:" + id}, nil
}

// serve runs a stand-in until its session ends, it is stopped, or it
// fails; a failure is recorded as an exit for the runner to report.
func (s *standInSidecars) serve(ctx context.Context, si *standIn, cfg protocol.Config, rdb *redis.Client) {
	defer close(si.done)
	defer rdb.Close()
	id := cfg.SessionID
	ended, err := (&standInSession{rdb: rdb, cfg: cfg}).run(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[id] == si {
		delete(s.running, id)
	}
	if ended || si.stopping || s.closed {
		return
	}
	s.log.Warn("stand-in sidecar failed", "session_id", id, "error", err)
	s.exited[id] = true
	select {
	case s.exits <- struct{}{}:
	default:
	}
}

func (s *standInSidecars) Stop(id string) error {
	s.mu.Lock()
	si := s.running[id]
	if si != nil {
		si.stopping = true
	}
	s.mu.Unlock()
	if si == nil {
		return launcher.ErrNotRunning
	}
	si.cancel()
	<-si.done
	return nil
}

func (s *standInSidecars) Forget(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.exited, id)
	return nil
}

func (s *standInSidecars) Running() []launcher.Handle {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]launcher.Handle, 0, len(s.running))
	for id := range s.running {
		out = append(out, launcher.Handle{SessionID: id, RuntimeJobID: "standin:" + id})
	}
	return out
}

// PID returns the runner's own process: the stand-ins live in it.
func (s *standInSidecars) PID(id string) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.running[id]
	return os.Getpid(), ok
}

func (s *standInSidecars) Exited(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.exited))
	for id := range s.exited {
		out = append(out, id)
	}
	return out, nil
}

func (s *standInSidecars) Exits() <-chan struct{} { return s.exits }

// standInSession is the sidecar of one session, as a stand-in.
type standInSession struct {
	rdb   *redis.Client
	cfg   protocol.Config
	turns int
}

// run says the session started, with the engine session it resumes or a
// new one, takes a first turn on a new one, then answers the commands
// until the session is stopped (ended) or ctx ends.
func (s *standInSession) run(ctx context.Context) (ended bool, err error) {
	id, resumed := s.cfg.SessionID, s.cfg.ResumeEngineSessionID
	engineID := resumed
	if engineID == "" {
		engineID = "standin-" + uuid.NewString()
	}
	if err := s.rdb.Set(ctx, protocol.EngineKey(id), engineID, 0).Err(); err != nil {
		return false, err
	}
	err = s.emit(ctx, protocol.SessionStarted{Engine: s.cfg.Engine, EngineSessionID: engineID, Model: s.cfg.Model,
		WorkingDirectory: s.cfg.WorkingDirectory, Resumed: resumed != "", PID: os.Getpid()})
	if err != nil {
		return false, err
	}
	if resumed == "" {
		if err := s.turn(ctx, "Standing in for the agent: "+s.cfg.Objective); err != nil {
			return false, err
		}
	}
	return s.readCommands(ctx)
}

// readCommands answers the session's commands from its cursor on.
func (s *standInSession) readCommands(ctx context.Context) (bool, error) {
	id := s.cfg.SessionID
	cursor, err := s.rdb.Get(ctx, protocol.CursorKey(id)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		cursor = "0"
	case err != nil:
		return false, err
	}
	for {
		streams, err := s.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{protocol.CommandsKey(id), cursor},
			Count: 16, Block: time.Second}).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return false, err
		}
		for _, m := range streams[0].Messages {
			ended, err := s.handle(ctx, m)
			if err != nil {
				return false, err
			}
			cursor = m.ID
			if err := s.rdb.Set(ctx, protocol.CursorKey(id), cursor, 0).Err(); err != nil || ended {
				return ended, err
			}
		}
	}
}

// handle answers one command: a steering message takes a turn, stop ends
// the session, anything else is refused with an error event.
func (s *standInSession) handle(ctx context.Context, m redis.XMessage) (ended bool, err error) {
	e, _ := protocol.ParseEntry(m.ID, m.Values)
	switch e.Type {
	case protocol.CommandSteeringMessage:
		var msg protocol.SteeringMessage
		if json.Unmarshal(e.Data, &msg) != nil || msg.Validate() != nil {
			return false, s.refuse(ctx, e, protocol.CodeBadData)
		}
		if err := s.emit(ctx, protocol.MessageDelivered{MessageID: msg.MessageID, Priority: msg.Priority}); err != nil {
			return false, err
		}
		return false, s.turn(ctx, "Understood: "+msg.Content)
	case protocol.CommandStop:
		if err := s.emit(ctx, protocol.StopAck{CommandID: e.CommandID}); err != nil {
			return false, err
		}
		return true, s.emit(ctx, protocol.SessionEnd{Status: protocol.StatusSuccess, Reason: protocol.ReasonStopped, NumTurns: s.turns})
	default:
		return false, s.refuse(ctx, e, protocol.CodeUnknownCommand)
	}
}

// turn writes one turn of the agent: a text block, then its end.
func (s *standInSession) turn(ctx context.Context, text string) error {
	s.turns++
	err := s.emit(ctx, protocol.AssistantMessage{MessageID: uuid.NewString(), BlockType: protocol.BlockText, Text: text, Model: s.cfg.Model})
	if err != nil {
		return err
	}
	return s.emit(ctx, protocol.TurnCompleted{NumTurns: s.turns})
}

func (s *standInSession) refuse(ctx context.Context, e protocol.Entry, code string) error {
	return s.emit(ctx, protocol.ErrorEvent{Code: code, Message: "the benchmark's stand-in sidecar does not carry this out",
		CommandType: e.Type, CommandID: e.CommandID, EntryID: e.ID})
}

func (s *standInSession) emit(ctx context.Context, ev protocol.Event) error {
	values, err := protocol.EventValues(ev, time.Now())
	if err != nil {
		return err
	}
	return s.rdb.XAdd(ctx, &redis.XAddArgs{Stream: protocol.EventsKey(s.cfg.SessionID), Values: values}).Err()
}
