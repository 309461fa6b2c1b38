package domain

import (
	"time"

	"github.com/google/uuid"
)

// ForkPoint is where a forked session came from: a checkpoint of another
// session of the same owner, the end of one of its turns.
type ForkPoint struct {
	// SessionID is the parent session.
	SessionID uuid.UUID `json:"sessionId"`
	// Turn is the parent's turn whose checkpoint the fork starts from.
	Turn int `json:"turn"`
	// NewObjective is true when the fork was given an objective of its
	// own: its agent's first message on top of the parent's conversation.
	// Otherwise the fork waits for a message.
	NewObjective bool `json:"newObjective,omitempty"`
}

// Validate reports a fork point that names no session or no turn.
func (p ForkPoint) Validate() error {
	if err := requireID("forkedFrom.sessionId", p.SessionID); err != nil {
		return err
	}
	if p.Turn < 0 {
		return invalid("forkedFrom.turn", "must not be negative")
	}
	return nil
}

// SessionForkedEvent records that a session was created as a fork of
// another's checkpoint; raised by the new session.
type SessionForkedEvent struct {
	SessionMeta
	// ParentSessionID is the session forked.
	ParentSessionID uuid.UUID `json:"parentSessionId"`
	// Checkpoint is the parent's turn whose checkpoint the fork starts from.
	Checkpoint int `json:"checkpoint"`
}

// EventType returns "session_forked".
func (SessionForkedEvent) EventType() string { return "session_forked" }

// SessionRewoundEvent records that a session was taken back to the
// checkpoint of an earlier turn: its working directory and its agent's
// conversation are restored to that turn's end. What came after stays in
// its transcript, and its metrics keep what it cost.
type SessionRewoundEvent struct {
	SessionMeta
	// Turn is the turn rewound to.
	Turn int `json:"turn"`
	// FromTurn is the session's turn count before the rewind.
	FromTurn int `json:"fromTurn"`
}

// EventType returns "session_rewound".
func (SessionRewoundEvent) EventType() string { return "session_rewound" }

// ForkedFrom returns the checkpoint the session was forked from, nil for
// a session that is no fork.
func (s *AgentSession) ForkedFrom() *ForkPoint { return clonePtr(s.forkedFrom) }

// OpRewind names Rewind in errors.
const OpRewind Operation = "Rewind"

// Rewind takes the session back to the checkpoint of turn: allowed while
// it waits between turns (Idle, Paused or Interrupted), never past the
// turns it has had. The runtime restores its working directory and
// conversation on SessionRewoundEvent.
func (s *AgentSession) Rewind(turn int, now time.Time) error {
	switch s.status {
	case StatusIdle, StatusPaused, StatusInterrupted:
	default:
		return s.refuse(OpRewind, ErrInvalidTransition)
	}
	if turn < 0 {
		return invalid("checkpoint", "must not be negative")
	}
	s.updatedAt = now.UTC()
	s.raise(SessionRewoundEvent{SessionMeta: s.meta(now), Turn: turn, FromTurn: s.metrics.TurnCount})
	return nil
}
