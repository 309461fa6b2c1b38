package api

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/domain"
)

// chainSubject filters every chain's events. A session's stream reads them
// all and keeps those of its chains (sessionChains): chain events are few,
// and a session can join a chain while its stream is open.
var chainSubject = bus.AggregateEventsFilter(domain.AggregateChain)

// sessionChains decides which chain events belong on one session's
// stream: those of the chain the session is in, or that name it (the chain
// created around it, its handoff, the session added after it).
type sessionChains struct {
	session uuid.UUID
	mu      sync.Mutex
	chains  map[uuid.UUID]bool
}

// chainEventRefs are the fields of chain events that tie them to a session.
type chainEventRefs struct {
	ChainID        uuid.UUID `json:"chainId"`
	FirstSessionID uuid.UUID `json:"firstSessionId"`
	FromSessionID  uuid.UUID `json:"fromSessionId"`
	NewSessionID   uuid.UUID `json:"newSessionId"`
}

// newSessionChains starts from the chain the session is in now, if the
// read side knows it.
func (s *Server) newSessionChains(ctx context.Context, session uuid.UUID) *sessionChains {
	c := &sessionChains{session: session, chains: map[uuid.UUID]bool{}}
	if s.deps.Queries == nil {
		return c
	}
	owner, err := uuid.Parse(OwnerID(ctx))
	if err != nil {
		return c
	}
	snap, err := s.deps.Queries.Session(ctx, owner, session)
	if err == nil && snap.ChainID != nil {
		c.chains[*snap.ChainID] = true
	}
	return c
}

// keep reports whether env belongs on the session's stream, and learns the
// chains the session joins as their events pass.
func (c *sessionChains) keep(env bus.Envelope) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if env.Aggregate == domain.AggregateSession {
		if env.Type == (domain.SessionChainAssignedEvent{}).EventType() {
			var refs chainEventRefs
			if json.Unmarshal(env.Data, &refs) == nil && refs.ChainID != uuid.Nil {
				c.chains[refs.ChainID] = true
			}
		}
		return true
	}
	if env.Aggregate != domain.AggregateChain {
		return true
	}
	var refs chainEventRefs
	if json.Unmarshal(env.Data, &refs) != nil {
		return false
	}
	if refs.ChainID == uuid.Nil {
		if id, err := uuid.Parse(env.AggregateID); err == nil {
			refs.ChainID = id
		}
	}
	if refs.FirstSessionID == c.session || refs.FromSessionID == c.session || refs.NewSessionID == c.session {
		c.chains[refs.ChainID] = true
	}
	return c.chains[refs.ChainID]
}
