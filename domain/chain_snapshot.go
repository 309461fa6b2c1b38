package domain

import (
	"slices"
	"time"

	"github.com/google/uuid"
)

// ID returns the chain id.
func (c *SessionChain) ID() uuid.UUID { return c.id }

// OwnerID returns the chain's owner.
func (c *SessionChain) OwnerID() uuid.UUID { return c.ownerID }

// OriginalObjective returns the objective the chain started with.
func (c *SessionChain) OriginalObjective() string { return c.originalObjective }

// Sessions returns the chain's sessions by position.
func (c *SessionChain) Sessions() []ChainedSession { return slices.Clone(c.sessions) }

// CurrentSessionID returns the latest session of the chain.
func (c *SessionChain) CurrentSessionID() uuid.UUID { return c.sessions[len(c.sessions)-1].SessionID }

// HandoffDocuments returns the handoffs in order.
func (c *SessionChain) HandoffDocuments() []HandoffDocument { return slices.Clone(c.handoffs) }

// PendingHandoff returns the handoff waiting for its next session, if any.
func (c *SessionChain) PendingHandoff() (HandoffDocument, bool) {
	i := c.pendingIndex()
	if i < 0 {
		return HandoffDocument{}, false
	}
	return c.handoffs[i], true
}

// Status returns the chain's status.
func (c *SessionChain) Status() ChainStatus { return c.status }

// CreatedAt returns when the chain was created.
func (c *SessionChain) CreatedAt() time.Time { return c.createdAt }

// CompletedAt returns when the chain was completed or cancelled, or nil.
func (c *SessionChain) CompletedAt() *time.Time { return clonePtr(c.completedAt) }

// Version returns the storage version, for the optimistic lock.
func (c *SessionChain) Version() int64 { return c.version }

// SessionChainSnapshot is the stored state of a chain.
type SessionChainSnapshot struct {
	ID                uuid.UUID         `json:"id"`
	OwnerID           uuid.UUID         `json:"ownerId"`
	OriginalObjective string            `json:"originalObjective"`
	Sessions          []ChainedSession  `json:"sessions"`
	HandoffDocuments  []HandoffDocument `json:"handoffDocuments"`
	Status            ChainStatus       `json:"status"`
	CreatedAt         time.Time         `json:"createdAt"`
	CompletedAt       *time.Time        `json:"completedAt,omitempty"`
	Version           int64             `json:"version"`
}

// Snapshot returns the chain as plain values.
func (c *SessionChain) Snapshot() SessionChainSnapshot {
	return SessionChainSnapshot{ID: c.id, OwnerID: c.ownerID, OriginalObjective: c.originalObjective,
		Sessions: c.Sessions(), HandoffDocuments: c.HandoffDocuments(), Status: c.status,
		CreatedAt: c.createdAt, CompletedAt: c.CompletedAt(), Version: c.version}
}

// UnmarshalSessionChainFromDatabase rebuilds a stored chain and checks its
// invariants: positions 1..N, handoffs between adjacent sessions, at most
// one pending handoff and it from the current session, CompletedAt set
// exactly when the chain is closed.
func UnmarshalSessionChainFromDatabase(snap SessionChainSnapshot) (*SessionChain, error) {
	if err := requireID("id", snap.ID); err != nil {
		return nil, err
	}
	if err := requireID("ownerId", snap.OwnerID); err != nil {
		return nil, err
	}
	if snap.Status != ChainActive && snap.Status != ChainCompleted && snap.Status != ChainCancelled {
		return nil, invalid("status", "unknown chain status %q", snap.Status)
	}
	if (snap.Status == ChainActive) != (snap.CompletedAt == nil) {
		return nil, invalid("completedAt", "is set exactly when the chain is closed")
	}
	if len(snap.Sessions) == 0 {
		return nil, invalid("sessions", "a chain has at least one session")
	}
	position := map[uuid.UUID]int{}
	for i, s := range snap.Sessions {
		if s.Position != i+1 || s.SessionID == uuid.Nil || position[s.SessionID] != 0 {
			return nil, invalid("sessions", "sessions must be distinct and at contiguous positions 1..N")
		}
		position[s.SessionID] = s.Position
	}
	current := snap.Sessions[len(snap.Sessions)-1].SessionID
	pending := 0
	for _, h := range snap.HandoffDocuments {
		from := position[h.FromSessionID]
		switch {
		case from == 0:
			return nil, invalid("handoffDocuments", "handoff %s starts from a session outside the chain", h.ID)
		case h.IsPending():
			pending++
			if h.FromSessionID != current || pending > 1 {
				return nil, invalid("handoffDocuments", "only the current session may have a pending handoff")
			}
		case position[h.ToSessionID] != from+1:
			return nil, invalid("handoffDocuments", "handoff %s must link adjacent sessions", h.ID)
		}
	}
	return &SessionChain{id: snap.ID, ownerID: snap.OwnerID, originalObjective: snap.OriginalObjective,
		sessions: slices.Clone(snap.Sessions), handoffs: slices.Clone(snap.HandoffDocuments), status: snap.Status,
		createdAt: snap.CreatedAt, completedAt: clonePtr(snap.CompletedAt), version: snap.Version}, nil
}
