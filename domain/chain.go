package domain

import (
	"slices"
	"time"

	"github.com/google/uuid"
)

// MaxHandoffChars bounds a handoff's summary and remaining work.
const MaxHandoffChars = 4000

// DefaultMaxChainSessions is how many sessions a chain may hold when its
// deployment sets no other limit.
const DefaultMaxChainSessions = 10

// ChainStatus is the state of a SessionChain. The zero value is invalid.
type ChainStatus string

// The chain statuses.
const (
	ChainActive    ChainStatus = "Active"
	ChainCompleted ChainStatus = "Completed"
	ChainCancelled ChainStatus = "Cancelled"
)

// ChainedSession is one session of a chain, at its 1-based position.
type ChainedSession struct {
	SessionID uuid.UUID `json:"sessionId"`
	Position  int       `json:"position"`
	JoinedAt  time.Time `json:"joinedAt"`
}

// HandoffDocument is what a session that ran out of context hands to the
// next one. ToSessionID is uuid.Nil until the next session is attached.
type HandoffDocument struct {
	ID            uuid.UUID `json:"id"`
	FromSessionID uuid.UUID `json:"fromSessionId"`
	ToSessionID   uuid.UUID `json:"toSessionId"`
	Summary       string    `json:"summary"`
	RemainingWork string    `json:"remainingWork"`
	KeyDecisions  string    `json:"keyDecisions,omitempty"`
	CreatedAt     time.Time `json:"createdAt"`
}

// IsPending reports a handoff still waiting for its next session.
func (h HandoffDocument) IsPending() bool { return h.ToSessionID == uuid.Nil }

// SessionChain is the aggregate root of a piece of work that spans several
// sessions because context windows ran out: the sessions in order, the
// handoffs between them and the original objective. Chains are created
// lazily, at the first exhaustion.
type SessionChain struct {
	eventRecorder

	id                uuid.UUID
	ownerID           uuid.UUID
	originalObjective string
	sessions          []ChainedSession
	handoffs          []HandoffDocument
	status            ChainStatus
	createdAt         time.Time
	completedAt       *time.Time
	version           int64
}

// NewSessionChain returns an Active chain whose first (and current)
// session is firstSessionID.
func NewSessionChain(id, ownerID uuid.UUID, objective string, firstSessionID uuid.UUID, now time.Time) (*SessionChain, error) {
	if err := requireID("id", id); err != nil {
		return nil, err
	}
	if err := requireID("ownerId", ownerID); err != nil {
		return nil, err
	}
	if err := requireID("firstSessionId", firstSessionID); err != nil {
		return nil, err
	}
	objective, err := requireText("originalObjective", objective, 1, MaxObjectiveChars)
	if err != nil {
		return nil, err
	}
	t := now.UTC()
	c := &SessionChain{id: id, ownerID: ownerID, originalObjective: objective, status: ChainActive, createdAt: t,
		sessions: []ChainedSession{{SessionID: firstSessionID, Position: 1, JoinedAt: t}}}
	c.raise(SessionChainCreatedEvent{ChainMeta: c.meta(now), OriginalObjective: objective, FirstSessionID: firstSessionID})
	return c, nil
}

func (c *SessionChain) meta(now time.Time) ChainMeta {
	return ChainMeta{ChainID: c.id, OwnerID: c.ownerID, OccurredAt: now.UTC()}
}

func (c *SessionChain) refuse(op string, reason error) error {
	return &TransitionError{Aggregate: "SessionChain", Operation: op, Status: string(c.status), Reason: reason}
}

func (c *SessionChain) requireActive(op string) error {
	if c.status != ChainActive {
		return c.refuse(op, ErrInvalidTransition)
	}
	return nil
}

// InitiateHandoff records the handoff the current session wrote. Its
// ToSessionID stays empty until AttachSession adds the next session; only
// one handoff may wait at a time.
func (c *SessionChain) InitiateHandoff(docID, fromSessionID uuid.UUID, summary, remainingWork, keyDecisions string, now time.Time) (HandoffDocument, error) {
	if err := c.requireActive("InitiateHandoff"); err != nil {
		return HandoffDocument{}, err
	}
	if err := requireID("handoffDocumentId", docID); err != nil {
		return HandoffDocument{}, err
	}
	if fromSessionID != c.CurrentSessionID() {
		return HandoffDocument{}, c.refuse("InitiateHandoff", ErrNotCurrentSession)
	}
	if _, ok := c.PendingHandoff(); ok {
		return HandoffDocument{}, c.refuse("InitiateHandoff", ErrHandoffPending)
	}
	var err error
	if summary, err = requireText("summary", summary, 1, MaxHandoffChars); err != nil {
		return HandoffDocument{}, err
	}
	if remainingWork, err = requireText("remainingWork", remainingWork, 1, MaxHandoffChars); err != nil {
		return HandoffDocument{}, err
	}
	if keyDecisions, err = optionalText("keyDecisions", keyDecisions, MaxHandoffChars); err != nil {
		return HandoffDocument{}, err
	}
	if slices.ContainsFunc(c.handoffs, func(h HandoffDocument) bool { return h.ID == docID }) {
		return HandoffDocument{}, c.refuse("InitiateHandoff", ErrDuplicate)
	}
	h := HandoffDocument{ID: docID, FromSessionID: fromSessionID, Summary: summary, RemainingWork: remainingWork,
		KeyDecisions: keyDecisions, CreatedAt: now.UTC()}
	c.handoffs = append(c.handoffs, h)
	c.raise(SessionHandoffInitiatedEvent{ChainMeta: c.meta(now), FromSessionID: fromSessionID, HandoffDocumentID: docID})
	return h, nil
}

// EnsureRoomForSession refuses another session once the chain holds
// maxSessions (DefaultMaxChainSessions when not positive): work that keeps
// running out of context must not hand itself off, and spend, forever.
func (c *SessionChain) EnsureRoomForSession(maxSessions int) error {
	if maxSessions <= 0 {
		maxSessions = DefaultMaxChainSessions
	}
	if len(c.sessions) >= maxSessions {
		return c.refuse("AttachSession", ErrChainLimitReached)
	}
	return nil
}

// AttachSession appends the continuation session at the next position,
// makes it current and fills the waiting handoff's ToSessionID.
func (c *SessionChain) AttachSession(sessionID uuid.UUID, now time.Time) error {
	if err := c.requireActive("AttachSession"); err != nil {
		return err
	}
	if err := requireID("sessionId", sessionID); err != nil {
		return err
	}
	if slices.ContainsFunc(c.sessions, func(s ChainedSession) bool { return s.SessionID == sessionID }) {
		return c.refuse("AttachSession", ErrDuplicate)
	}
	pos := len(c.sessions) + 1
	c.sessions = append(c.sessions, ChainedSession{SessionID: sessionID, Position: pos, JoinedAt: now.UTC()})
	if i := c.pendingIndex(); i >= 0 {
		c.handoffs[i].ToSessionID = sessionID
	}
	c.raise(SessionAddedToChainEvent{ChainMeta: c.meta(now), NewSessionID: sessionID, Position: pos})
	return nil
}

// Complete closes the chain once its work is done: only while Active and
// when the current session is Idle or Completed. totalCost is the sum of
// the chain's sessions' spend, for the event.
func (c *SessionChain) Complete(currentSessionStatus SessionStatus, totalCost USD, now time.Time) error {
	if err := c.requireActive("Complete"); err != nil {
		return err
	}
	if currentSessionStatus != StatusIdle && currentSessionStatus != StatusCompleted {
		return &TransitionError{Aggregate: "AgentSession", Operation: "CompleteChain", Status: string(currentSessionStatus), Reason: ErrInvalidTransition}
	}
	c.close(ChainCompleted, now)
	c.raise(SessionChainCompletedEvent{ChainMeta: c.meta(now), TotalSessions: len(c.sessions), TotalCostUsd: totalCost})
	return nil
}

// Cancel cancels an Active chain; the reaction cancels its live sessions.
func (c *SessionChain) Cancel(now time.Time) error {
	if err := c.requireActive("Cancel"); err != nil {
		return err
	}
	c.close(ChainCancelled, now)
	c.raise(SessionChainCancelledEvent{ChainMeta: c.meta(now)})
	return nil
}

// close sets the final status and CompletedAt, once.
func (c *SessionChain) close(to ChainStatus, now time.Time) {
	c.status = to
	if c.completedAt == nil {
		t := now.UTC()
		c.completedAt = &t
	}
}

func (c *SessionChain) pendingIndex() int {
	return slices.IndexFunc(c.handoffs, HandoffDocument.IsPending)
}
