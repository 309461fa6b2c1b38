package sidecar

import (
	"context"
	"time"

	"github.com/agentbus/agentbus/sidecar/engine"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// loop drives the engine turn by turn until the session ends.
func (r *runner) loop(ctx context.Context) {
	in := engine.Input{Kind: engine.InputObjective, Text: r.config().Objective}
	first := true
	if r.config().ResumeEngineSessionID != "" && !r.config().ResumeWithObjective {
		// A sidecar started again: its predecessor ran the objective.
		first = false
		r.endTurnLeftOpen()
	}
	for {
		r.mu.Lock()
		step := r.betweenTurnsLocked(ctx)
		var msg *protocol.SteeringMessage
		if step == stepTurn {
			msg, step = r.nextInputLocked(&first, &in)
		}
		switch step {
		case stepEnd:
			return
		case stepAgain:
			continue
		}
		if r.runTurn(ctx, in, msg) {
			return
		}
	}
}

// loopStep is what the loop does next, after a look at the session
// between turns.
type loopStep int

const (
	// stepTurn runs a turn; r.mu is still held.
	stepTurn loopStep = iota
	// stepAgain looks again; r.mu was released.
	stepAgain
	// stepEnd ends the loop; r.mu was released.
	stepEnd
)

// endTurnLeftOpen ends the turn a sidecar's predecessor may have left open:
// the agent then waits for a message.
func (r *runner) endTurnLeftOpen() {
	r.mu.Lock()
	r.more = false
	r.mu.Unlock()
	end := protocol.TurnCompleted{}
	if r.config().ResumeAt != "" {
		// Resumed at a checkpoint (a fork or a rewind): the restored
		// state is the checkpoint the session goes on from.
		end.Checkpoint = r.checkpoint(0)
	}
	// The session may have been paused in the turn left open: that turn
	// then ends once the session is resumed, as a turn that ends during a
	// pause does.
	if !r.holdTurnEnd(&end, false) {
		r.emitLog(end)
	}
}

// betweenTurnsLocked handles, with r.mu held, what comes before any next
// turn: a suspension, a stop, a reload, a pause, or the end of a turn
// held during a pause.
func (r *runner) betweenTurnsLocked(ctx context.Context) loopStep {
	switch {
	case r.suspended:
		r.mu.Unlock()
		return stepEnd
	case r.stop != nil:
		r.mu.Unlock()
		r.finishStop(false)
		return stepEnd
	case len(r.reloads) > 0:
		rl := r.reloads[0]
		r.reloads = r.reloads[1:]
		r.mu.Unlock()
		r.applyReload(ctx, rl)
		return stepAgain
	case r.heldLocked():
		return stepAgain
	case r.heldTurnEnd != nil:
		// Resumed: the turn that ended during the pause ends now, its work
		// done unless more waits.
		end := r.heldTurnEnd
		r.heldTurnEnd = nil
		end.Done = !r.more && len(r.immediate) == 0 && len(r.queued) == 0 && !r.interrupted
		r.lastTurnEnd = end
		r.mu.Unlock()
		r.emitLog(*end)
		return stepAgain
	}
	return stepTurn
}

// nextInputLocked picks, with r.mu held, the next turn's input: the
// objective first, then an Immediate message, a Queued one, or more of the
// work. Without any, the session ends, or waits Idle when it stays.
func (r *runner) nextInputLocked(first *bool, in *engine.Input) (*protocol.SteeringMessage, loopStep) {
	var msg *protocol.SteeringMessage
	switch {
	case *first:
		*first = false
	case len(r.immediate) > 0:
		m := r.immediate[0]
		r.immediate, msg = r.immediate[1:], &m
	case len(r.queued) > 0:
		m := r.queued[0]
		r.queued, msg = r.queued[1:], &m
	case r.more && !r.interrupted:
		*in = engine.Input{Kind: engine.InputContinue}
	case !r.cfg.StayIdle && !r.interrupted:
		r.mu.Unlock()
		r.finish(r.sessionEnd(protocol.StatusSuccess, protocol.ReasonCompleted, nil))
		return nil, stepEnd
	default:
		// Idle: wait for a message, a command or the end.
		ch := r.changed
		r.mu.Unlock()
		<-ch
		return nil, stepAgain
	}
	if msg != nil {
		*in = engine.Input{Kind: engine.InputMessage, Text: msg.Content, MessageID: msg.MessageID}
		r.interrupted = false
	}
	return msg, stepTurn
}

// runTurn runs the turn of in, entered with r.mu held, and reports whether
// the session ended. The turn's cancel is published under the same lock
// that picked its input, so a command either sees no turn (and is handled
// between turns) or cuts this one short: none falls in between.
func (r *runner) runTurn(ctx context.Context, in engine.Input, msg *protocol.SteeringMessage) bool {
	tctx, cancel := context.WithCancelCause(ctx)
	r.turnCancel = cancel
	r.turnCost = 0
	r.mu.Unlock()
	if msg != nil {
		r.emitAnswer(protocol.MessageDelivered{MessageID: msg.MessageID, Priority: msg.Priority}, delivered(msg.MessageID))
	}
	ended := r.turn(tctx, in)
	cancel(nil)
	return ended
}

// turnOutcome is how a turn left the session, read under r.mu when it
// returned.
type turnOutcome struct {
	cause, err                     error
	acks                           []string
	stopping, exhausted, suspended bool
	handoff                        bool
	done                           *protocol.TurnCompleted
}

// turn runs one turn and writes what follows it. It reports whether the
// session ended.
func (r *runner) turn(ctx context.Context, in engine.Input) bool {
	started := time.Now()
	res, err := r.sess.Turn(ctx, in)
	o := r.outcome(ctx, res, err, started)
	if o.done != nil {
		o.done.Checkpoint = r.checkpoint(o.done.NumTurns)
	}
	if r.endSession(o) {
		return true
	}
	if o.done != nil {
		if !r.holdTurnEnd(o.done, true) {
			r.emitLog(*o.done)
		}
	}
	if o.cause != nil {
		r.log.Info("turn cut short", "cause", o.cause)
	}
	r.emitInterruptAcks(o.acks)
	return false
}

// outcome records a returned turn and reads how it left the session; a
// turn that ran to its end counts, with its cost and whether the work is
// done.
func (r *runner) outcome(ctx context.Context, res engine.TurnResult, err error, started time.Time) turnOutcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.turnCancel = nil
	r.more = res.More
	o := turnOutcome{cause: context.Cause(ctx), err: err, acks: r.interruptAcks,
		stopping: r.stop != nil, exhausted: r.exhausted, suspended: r.suspended, handoff: r.handoff != nil}
	r.interruptAcks = nil
	if len(o.acks) > 0 {
		r.interrupted = true
	}
	if o.cause != nil || err != nil || o.handoff || o.exhausted || o.stopping || o.suspended {
		return o
	}
	r.turns++
	workDone := !r.more && len(r.immediate) == 0 && len(r.queued) == 0 && len(r.reloads) == 0 &&
		!r.paused && !r.interrupted
	o.done = &protocol.TurnCompleted{
		CostUSD: roundCost(r.turnCost), TotalCostUSD: roundCost(r.totalCost),
		DurationMS: time.Since(started).Milliseconds(), NumTurns: r.turns,
		Final: workDone && !r.cfg.StayIdle, Done: workDone,
	}
	return o
}

// endSession ends the session when the turn's outcome ends it, and reports
// whether it did.
func (r *runner) endSession(o turnOutcome) bool {
	switch {
	case o.suspended:
		r.emitInterruptAcks(o.acks)
	case o.stopping:
		r.emitInterruptAcks(o.acks)
		r.finishStop(false)
	case o.exhausted:
		r.finishExhausted()
	case o.err != nil && o.cause == nil:
		r.log.Error("agent failed", "error", o.err)
		r.finish(r.sessionEnd(protocol.StatusError, protocol.ReasonAgentError, o.err))
	case o.handoff:
		r.finish(r.sessionEnd(protocol.StatusSuccess, protocol.ReasonVoluntaryHandoff, nil))
	case o.done != nil && o.done.Final:
		r.finish(r.sessionEnd(protocol.StatusSuccess, protocol.ReasonCompleted, nil), *o.done)
	default:
		return false
	}
	return true
}

// suspend cuts the running turn short and makes the loop return without
// ending the session.
func (r *runner) suspend() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.suspended = true
	if r.turnCancel != nil {
		r.turnCancel(errSuspended)
	}
	r.notifyLocked()
}

func (r *runner) isSuspended() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.suspended
}

// requestStop stops the agent: it cuts the running turn short and, when the
// agent has not stopped within timeout, ends the session anyway.
func (r *runner) requestStop(commandID string, timeout time.Duration, force bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if timeout <= 0 {
		timeout = r.cfg.StopTimeout()
	}
	if force {
		timeout = 0
	}
	if r.stop == nil {
		r.stop = &stopRequest{timer: time.AfterFunc(timeout, r.forceStop)}
		if r.turnCancel != nil {
			r.turnCancel(errStopped)
		}
		r.notifyLocked()
	} else if force {
		r.stop.timer.Reset(0)
	}
	r.stop.commandIDs = append(r.stop.commandIDs, commandID)
}

// forceStop ends a session whose agent did not stop in time.
func (r *runner) forceStop() {
	if r.finishStop(true) {
		r.force.Do(func() { close(r.forced) })
	}
}

// finishStop writes the stop acks and session_end; it reports whether it
// ended the session (false when something else ended it first).
func (r *runner) finishStop(forced bool) bool {
	r.mu.Lock()
	r.stop.timer.Stop()
	ids := append([]string(nil), r.stop.commandIDs...)
	r.mu.Unlock()
	acks := make([]protocol.Event, 0, len(ids))
	for _, id := range ids {
		acks = append(acks, protocol.StopAck{CommandID: id, Forced: forced})
	}
	if !r.finish(r.sessionEnd(protocol.StatusSuccess, protocol.ReasonStopped, nil), acks...) {
		return false
	}
	for _, id := range ids {
		r.inbox.answered(acked(protocol.EventStopAck, id))
	}
	return true
}

// finishExhausted writes context_exhausted, the handoff document and
// session_end.
func (r *runner) finishExhausted() {
	r.mu.Lock()
	used, limit, cfg := r.contextUsed, r.contextMax, r.cfg
	r.mu.Unlock()
	doc := protocol.HandoffDocument{
		Summary:       "The context window filled up while working on: " + cfg.Objective,
		RemainingWork: "Go on with the objective: " + cfg.Objective,
	}
	if h, ok := r.sess.(engine.Handoffer); ok {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		d, err := h.Handoff(ctx)
		cancel()
		if err != nil {
			r.log.Warn("engine wrote no handoff document; using a generic one", "error", err)
		} else {
			doc = d
		}
	}
	doc.TokensUsed, doc.ChainID = used, cfg.ChainID
	r.finish(r.sessionEnd(protocol.StatusSuccess, protocol.ReasonContextExhausted, nil),
		protocol.ContextExhausted{Percent: percent(used, limit), UsedTokens: used, MaxTokens: limit}, doc)
}

func (r *runner) applyReload(ctx context.Context, rl reloadRequest) {
	if err := r.sess.Reload(ctx, rl.cfg); err != nil {
		r.emitLog(protocol.ErrorEvent{
			Code: protocol.CodeReloadFailed, Message: err.Error(),
			CommandType: protocol.CommandReloadConfig, CommandID: rl.commandID, EntryID: rl.entryID,
		})
		return
	}
	r.mu.Lock()
	r.cfg = rl.cfg
	r.mu.Unlock()
	r.log.Info("config reloaded", "model", r.sess.Model())
	r.emitLog(protocol.ReloadConfigAck{CommandID: rl.commandID, Model: r.sess.Model(), EngineSessionID: r.sess.ID()})
}
