package commands

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
)

var chains postgres.Chains

// onChain adapts one operation on a chain into a Handler: decode, load
// (hiding another owner's chain), apply, save with the events.
func onChain[T any](now Clock, apply func(ctx context.Context, tx pgx.Tx, c *domain.SessionChain, in T, at time.Time) error) Handler {
	return func(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
		in, err := decode[T](cmd)
		if err != nil {
			return nil, err
		}
		c, err := chains.Update(ctx, tx, cmd.AggregateID, func(c *domain.SessionChain) error {
			if err := checkOwner(cmd, c.OwnerID().String(), "chain"); err != nil {
				return err
			}
			return apply(ctx, tx, c, in, now().UTC())
		})
		if err != nil {
			return nil, err
		}
		return chainState(c), nil
	}
}

func registerChain(d *Dispatcher, now Clock) {
	reg := func(name string, h Handler) { d.Register(domain.AggregateChain, name, h) }
	reg(command.CreateChain, createChain(now))
	reg(command.InitiateHandoff, initiateHandoff(now))
	reg(command.AttachSession, onChain(now, attachSession))
	reg(command.CompleteChain, onChain(now, completeChain))
	reg(command.CancelChain, onChain(now, func(_ context.Context, _ pgx.Tx, c *domain.SessionChain, _ none, at time.Time) error {
		return c.Cancel(at)
	}))
}

// createChain creates a chain around its first session and assigns the
// session to it in the same transaction. Repeating it for a session
// already in that chain returns the chain; a session of another chain is
// a conflict.
func createChain(now Clock) Handler {
	return func(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
		in, err := decode[command.CreateChainData](cmd)
		if err != nil {
			return nil, err
		}
		if err := required("firstSessionId", in.FirstSessionID); err != nil {
			return nil, err
		}
		s, err := ownSession(ctx, tx, cmd, in.FirstSessionID)
		if err != nil {
			return nil, err
		}
		if id := s.ChainID(); id != nil && *id == cmd.AggregateID {
			c, err := chains.Get(ctx, tx, *id)
			if err != nil {
				return nil, err
			}
			return c.Snapshot(), nil // as stored: nothing was saved
		}
		objective := in.OriginalObjective
		if objective == "" {
			objective = s.Objective()
		}
		at := now().UTC()
		c, err := domain.NewSessionChain(cmd.AggregateID, s.OwnerID(), objective, s.ID(), at)
		if err != nil {
			return nil, err
		}
		if err := startChain(ctx, tx, s, c, at); err != nil {
			return nil, err
		}
		return chainState(c), nil
	}
}

// startChain assigns s to the new chain c and stores both. The session is
// written first: two transactions creating a chain for one session then
// collide on its version, and the retry sees the chain.
func startChain(ctx context.Context, tx pgx.Tx, s *domain.AgentSession, c *domain.SessionChain, at time.Time) error {
	if err := s.AssignToChain(c.ID(), at); err != nil {
		return err
	}
	if err := sessions.Save(ctx, tx, s); err != nil {
		return err
	}
	return created(chains.Add(ctx, tx, c), "SessionChain", c.ID())
}

// initiateHandoff records the handoff document of the session named by
// the command's aggregateId, whose context must be exhausted. A session
// without a chain gets one first (command.ChainIDFor), in the same
// transaction: the chain is created lazily, at the first handoff.
func initiateHandoff(now Clock) Handler {
	return func(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
		in, err := decode[command.InitiateHandoffData](cmd)
		if err != nil {
			return nil, err
		}
		s, err := ownSession(ctx, tx, cmd, cmd.AggregateID)
		if err != nil {
			return nil, err
		}
		if s.Status() != domain.StatusContextExhausted {
			// The work moves on only once the session has stopped.
			return nil, &domain.TransitionError{Aggregate: "AgentSession", Operation: "InitiateHandoff",
				Status: string(s.Status()), Reason: domain.ErrInvalidTransition}
		}
		at := now().UTC()
		docID := uuid.NewSHA1(cmd.ID, []byte("handoff_document"))
		handoff := func(c *domain.SessionChain) error {
			_, err := c.InitiateHandoff(docID, s.ID(), in.Summary, in.RemainingWork, in.KeyDecisions, at)
			return err
		}
		if id := s.ChainID(); id != nil {
			c, err := chains.Update(ctx, tx, *id, handoff)
			if err != nil {
				return nil, err
			}
			return chainState(c), nil
		}
		c, err := domain.NewSessionChain(command.ChainIDFor(s.ID()), s.OwnerID(), s.Objective(), s.ID(), at)
		if err != nil {
			return nil, err
		}
		if err := handoff(c); err != nil {
			return nil, err
		}
		if err := startChain(ctx, tx, s, c, at); err != nil {
			return nil, err
		}
		return chainState(c), nil
	}
}

// attachSession adds the continuation session to the chain, assigning
// the session to the chain if it was started without it.
func attachSession(ctx context.Context, tx pgx.Tx, c *domain.SessionChain, in command.AttachSessionData, at time.Time) error {
	if err := required("sessionId", in.SessionID); err != nil {
		return err
	}
	s, err := sessions.Get(ctx, tx, in.SessionID)
	if errors.Is(err, postgres.ErrNotFound) || (err == nil && s.OwnerID() != c.OwnerID()) {
		return &domain.NotFoundError{Entity: "AgentSession", ID: in.SessionID.String()}
	}
	if err != nil {
		return err
	}
	if s.ChainID() == nil || *s.ChainID() != c.ID() {
		if err := s.AssignToChain(c.ID(), at); err != nil {
			return err
		}
		if err := sessions.Save(ctx, tx, s); err != nil {
			return err
		}
	}
	return c.AttachSession(s.ID(), at)
}

// completeChain closes the chain if its current session is Idle or
// Completed; the event carries the cost of all its sessions.
func completeChain(ctx context.Context, tx pgx.Tx, c *domain.SessionChain, _ none, at time.Time) error {
	current, err := sessions.Get(ctx, tx, c.CurrentSessionID())
	if err != nil {
		return err
	}
	var total domain.USD
	for _, cs := range c.Sessions() {
		if cs.SessionID == current.ID() {
			total += current.Metrics().TotalCostUsd
			continue
		}
		s, err := sessions.Get(ctx, tx, cs.SessionID)
		if err != nil {
			return err
		}
		total += s.Metrics().TotalCostUsd
	}
	return c.Complete(current.Status(), total, at)
}
