package sidecar

import (
	"context"

	"github.com/agentbus/agentbus/sidecar/protocol"
)

// A pause holds the agent at its next safe point with its state kept, and
// a resume lets it go on. Everything the sidecar does for the two lives
// here: their commands, the safe point the engine calls, the acks, and the
// turn ends held while paused.

func init() {
	commandHandlers[protocol.CommandPause] = (*runner).onPause
	commandHandlers[protocol.CommandResume] = (*runner).onResume
}

func (r *runner) onPause(e protocol.Entry) error {
	var d protocol.Pause
	if err := protocol.DecodeData(e.Data, &d); err != nil {
		return err
	}
	r.mu.Lock()
	r.paused = true
	r.pauseAcks = append(r.pauseAcks, e.CommandID)
	if r.turnCancel == nil && r.heldTurnEnd == nil && r.lastTurnEnd != nil {
		// A session is paused only while Running; with no turn running
		// here, the turn end last written crossed the pause and was
		// refused by a Pausing session. It is written again once resumed,
		// to end the turn of the Running session.
		end := *r.lastTurnEnd
		r.heldTurnEnd = &end
	}
	var acks []string
	if r.waiting > 0 {
		// The engine waits for a person: it is at rest already.
		acks = r.takePauseAcksLocked()
	}
	// Otherwise the engine's next safe point, or the loop between turns,
	// acknowledges.
	r.notifyLocked()
	r.mu.Unlock()
	r.emitPauseAcks(acks)
	return nil
}

func (r *runner) onResume(e protocol.Entry) error {
	var d protocol.Resume
	if err := protocol.DecodeData(e.Data, &d); err != nil {
		return err
	}
	// A pause that never reached a safe point is acknowledged first, so
	// every command gets its ack in order; and the engine goes on only
	// once the resume is acknowledged, so nothing it does after the
	// resume is recorded before it. Commands are handled one at a time:
	// no other pause comes in between.
	r.mu.Lock()
	acks := r.takePauseAcksLocked()
	r.mu.Unlock()
	r.emitPauseAcks(acks)
	r.emitLog(protocol.ResumeAck{CommandID: e.CommandID})
	r.mu.Lock()
	r.paused = false
	r.notifyLocked()
	r.mu.Unlock()
	return nil
}

// SafePoint holds the engine while the session is paused.
func (r *runner) SafePoint(ctx context.Context) error {
	for {
		r.mu.Lock()
		if !r.paused {
			r.mu.Unlock()
			return ctx.Err()
		}
		acks := r.takePauseAcksLocked()
		ch := r.changed
		r.mu.Unlock()
		r.emitPauseAcks(acks)
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (r *runner) takePauseAcksLocked() []string {
	acks := r.pauseAcks
	r.pauseAcks = nil
	return acks
}

func (r *runner) emitPauseAcks(ids []string) {
	for _, id := range ids {
		r.emitAnswer(protocol.PauseAck{CommandID: id}, acked(protocol.EventPauseAck, id))
	}
}

func (r *runner) emitInterruptAcks(ids []string) {
	for _, id := range ids {
		r.emitAnswer(protocol.InterruptAck{CommandID: id}, acked(protocol.EventInterruptAck, id))
	}
}

// percent returns used as a share of limit, 0-100, to one decimal.
func percent(used, limit int64) float64 {
	if limit <= 0 {
		return 0
	}
	return float64(used*1000/limit) / 10
}

// atRestLocked acknowledges the pending pauses of a paused session whose
// engine is at rest (it waits for a person), and unlocks r.mu.
func (r *runner) atRestLocked() {
	var acks []string
	if r.paused {
		acks = r.takePauseAcksLocked()
	}
	r.mu.Unlock()
	r.emitPauseAcks(acks)
}

// heldLocked holds the loop between turns while the session is paused: it
// acknowledges the pending pauses, unlocks r.mu and waits for a change.
// It reports false, r.mu still held, when the session is not paused.
func (r *runner) heldLocked() bool {
	if !r.paused {
		return false
	}
	acks := r.takePauseAcksLocked()
	ch := r.changed
	r.mu.Unlock()
	r.emitPauseAcks(acks)
	<-ch
	return true
}

// holdTurnEnd keeps end, a turn's end, to write once the session is
// resumed if it is paused, and reports whether it did; otherwise, if last,
// end is the turn end last written.
func (r *runner) holdTurnEnd(end *protocol.TurnCompleted, last bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.paused {
		r.heldTurnEnd = end
		return true
	}
	if last {
		r.lastTurnEnd = end
	}
	return false
}
