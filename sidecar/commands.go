package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentbus/agentbus/sidecar/engine"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// readCommands reads the command stream from cursor, handles each entry in
// order and records the last handled entry's id under the cursor key. It
// returns when ctx ends or the session is ending; entries read after that
// are left for nobody, their ids not recorded.
func (r *runner) readCommands(ctx context.Context, cursor string) {
	key := protocol.CommandsKey(r.id)
	for ctx.Err() == nil && !r.isClosing() {
		res, err := r.rdb.XRead(ctx, &redis.XReadArgs{
			Streams: []string{key, cursor}, Count: 100, Block: r.opts.CommandBlock,
		}).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.log.Warn("read commands", "error", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		for _, stream := range res {
			for _, m := range stream.Messages {
				if r.isClosing() {
					return
				}
				// Into the inbox before the cursor moves past it: a
				// sidecar that dies before answering it hands it on.
				r.inbox.take(m)
				r.handle(m)
				cursor = m.ID
				r.storeCursor(cursor)
			}
		}
	}
}

// storeCursor records the last handled entry. It does not depend on the
// reader's context: a command handled as the session ends (stop) must be
// recorded too.
func (r *runner) storeCursor(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.rdb.Set(ctx, protocol.CursorKey(r.id), id, 0).Err(); err != nil {
		r.log.Warn("command cursor not stored", "entry_id", id, "error", err)
	}
}

func (r *runner) isClosing() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closing
}

// commandError reports a command that could not be handled.
func (r *runner) commandError(e protocol.Entry, code string, err error) {
	r.log.Warn("command not handled", "type", e.Type, "command_id", e.CommandID, "entry_id", e.ID, "code", code, "error", err)
	r.emitLog(protocol.ErrorEvent{Code: code, Message: err.Error(), CommandType: e.Type, CommandID: e.CommandID, EntryID: e.ID})
}

// handle carries out one command entry.
func (r *runner) handle(m redis.XMessage) {
	e, err := protocol.ParseEntry(m.ID, m.Values)
	if err != nil {
		r.commandError(e, protocol.CodeBadData, err)
		return
	}
	r.log.Info("command", "type", e.Type, "command_id", e.CommandID, "entry_id", e.ID)
	r.traceAnswers(e)
	handler, ok := commandHandlers[e.Type]
	if !ok {
		r.commandError(e, protocol.CodeUnknownCommand, fmt.Errorf("unknown command type %q", e.Type))
		return
	}
	if err := handler(r, e); err != nil {
		code := protocol.CodeBadData
		if errors.Is(err, errNotPending) {
			code = protocol.CodeNotPending
		}
		r.commandError(e, code, err)
	}
}

var errNotPending = errors.New("nothing waits for it")

// traceAnswers makes the events answering e (its ack, error, or the
// message_delivered of a steering message) carry e's traceparent.
func (r *runner) traceAnswers(e protocol.Entry) {
	if e.Traceparent == "" {
		return
	}
	r.out.traceAnswers(e.CommandID, e.Traceparent)
	var steering struct {
		MessageID string `json:"message_id"`
	}
	if e.Type == protocol.CommandSteeringMessage && json.Unmarshal(e.Data, &steering) == nil {
		r.out.traceAnswers(steering.MessageID, e.Traceparent)
	}
}

// commandHandlers carry out each command type of the protocol; a type
// without one is answered with an unknown_command error. Its tests check
// it against protocol.CommandTypes and the control plane's two-phase
// controls. Pause and resume add theirs in pause.go.
var commandHandlers = map[string]func(*runner, protocol.Entry) error{
	protocol.CommandSteeringMessage:    (*runner).onSteering,
	protocol.CommandInterrupt:          (*runner).onInterrupt,
	protocol.CommandStop:               (*runner).onStop,
	protocol.CommandReloadConfig:       (*runner).onReload,
	protocol.CommandAnswerQuestion:     (*runner).onAnswer,
	protocol.CommandPlanDecision:       (*runner).onPlanDecision,
	protocol.CommandPermissionResponse: (*runner).onPermission,
	protocol.CommandRunValidation:      (*runner).onRunValidation,
}

func (r *runner) onSteering(e protocol.Entry) error {
	var m protocol.SteeringMessage
	if err := protocol.DecodeData(e.Data, &m); err != nil {
		return err
	}
	if err := m.Validate(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[m.MessageID] {
		r.log.Info("steering message seen before; ignored", "message_id", m.MessageID)
		return nil
	}
	r.seen[m.MessageID] = true
	if m.Priority == protocol.PriorityImmediate {
		r.immediate = append(r.immediate, m)
		if r.turnCancel != nil {
			r.turnCancel(errSteered)
		}
	} else {
		r.queued = append(r.queued, m)
	}
	r.notifyLocked()
	return nil
}

func (r *runner) onInterrupt(e protocol.Entry) error {
	var d protocol.Interrupt
	if err := protocol.DecodeData(e.Data, &d); err != nil {
		return err
	}
	r.mu.Lock()
	if r.turnCancel != nil {
		// Acknowledged when the turn has stopped.
		r.interruptAcks = append(r.interruptAcks, e.CommandID)
		r.turnCancel(errInterrupted)
		r.mu.Unlock()
		return nil
	}
	r.interrupted = true
	r.notifyLocked()
	r.mu.Unlock()
	r.emitInterruptAcks([]string{e.CommandID})
	return nil
}

func (r *runner) onStop(e protocol.Entry) error {
	var d protocol.Stop
	if err := protocol.DecodeData(e.Data, &d); err != nil {
		return err
	}
	if d.TimeoutMS < 0 {
		return errors.New("timeout_ms is negative")
	}
	r.requestStop(e.CommandID, time.Duration(d.TimeoutMS)*time.Millisecond, d.Force)
	return nil
}

func (r *runner) onReload(e protocol.Entry) error {
	var d protocol.ReloadConfig
	if err := protocol.DecodeData(e.Data, &d); err != nil {
		return err
	}
	if d.Config == nil {
		return errors.New("config is required")
	}
	cfg := *d.Config
	r.mu.Lock()
	defer r.mu.Unlock()
	if cfg.Engine == "" {
		cfg.Engine = r.cfg.Engine // a config may leave the engine to the sidecar
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	switch {
	case cfg.SessionID != "" && cfg.SessionID != r.id:
		return fmt.Errorf("config is for session %q", cfg.SessionID)
	case cfg.Engine != r.cfg.Engine:
		return fmt.Errorf("the engine cannot change on reload (%s -> %s)", r.cfg.Engine, cfg.Engine)
	}
	// Applied between turns by the loop.
	r.reloads = append(r.reloads, reloadRequest{commandID: e.CommandID, entryID: e.ID, cfg: cfg})
	r.notifyLocked()
	return nil
}

func (r *runner) onAnswer(e protocol.Entry) error {
	return reply(r, e, r.questions, "question",
		func(d protocol.AnswerQuestion) string { return d.ToolUseID },
		func(d protocol.AnswerQuestion) string { return d.Answer })
}

func (r *runner) onPlanDecision(e protocol.Entry) error {
	return reply(r, e, r.plans, "plan",
		func(d protocol.PlanDecision) string { return d.ToolUseID },
		func(d protocol.PlanDecision) engine.PlanDecision {
			return engine.PlanDecision{Approved: *d.Approved, Feedback: d.Feedback}
		})
}

func (r *runner) onPermission(e protocol.Entry) error {
	return reply(r, e, r.perms, "permission request",
		func(d protocol.PermissionResponse) string { return d.RequestID },
		func(d protocol.PermissionResponse) engine.Permission {
			return engine.Permission{Allow: d.Behavior == protocol.BehaviorAllow, Message: d.Message}
		})
}

// reply hands the answer a command of type C carries to the turn that
// waits on it in waiting, under the id key names; nothing waiting for it
// is errNotPending.
func reply[C interface{ Validate() error }, V any](r *runner, e protocol.Entry, waiting map[string]chan V, what string,
	key func(C) string, answer func(C) V) error {
	var d C
	if err := protocol.DecodeData(e.Data, &d); err != nil {
		return err
	}
	if err := d.Validate(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ch, ok := takeWaiter(waiting, key(d))
	if !ok {
		return fmt.Errorf("no %s %s: %w", what, key(d), errNotPending)
	}
	ch <- answer(d)
	return nil
}

// takeWaiter removes and returns the channel a turn waits on for the
// answer to id. An empty id takes the only one waiting: the control plane
// knows the question or plan, not the engine's id for it.
func takeWaiter[T any](waiting map[string]chan T, id string) (chan T, bool) {
	if id == "" && len(waiting) == 1 {
		for only := range waiting {
			id = only
		}
	}
	ch, ok := waiting[id]
	if ok {
		delete(waiting, id)
	}
	return ch, ok
}
