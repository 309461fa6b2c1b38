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

var pools postgres.Pools

func registerPool(d *Dispatcher, now Clock, pool domain.SessionPool) {
	d.Register(domain.AggregateSession, command.AllocateSession, func(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
		s, err := sessions.Get(ctx, tx, cmd.AggregateID)
		if err != nil {
			return nil, err
		}
		if err := pools.Lock(ctx, tx, s.OwnerID()); err != nil {
			return nil, err
		}
		active, err := pools.Active(ctx, tx, s.OwnerID())
		if err != nil {
			return nil, err
		}
		err = pool.Allocate(s, active, now().UTC())
		var full *domain.PoolExhaustedError
		if err != nil && !errors.As(err, &full) {
			return nil, err
		}
		// A full pool is not a refusal: the session stays Queued and the
		// exhaustion event is saved so that its owner hears of it.
		if err := sessions.Save(ctx, tx, s); err != nil {
			return nil, err
		}
		return command.AllocateResult{Allocated: full == nil, Session: SessionState(s)}, nil
	})
	d.Register(domain.AggregateSession, command.ReleaseSession, func(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
		s, err := sessions.Get(ctx, tx, cmd.AggregateID)
		if err != nil {
			return nil, err
		}
		if err := pools.Lock(ctx, tx, s.OwnerID()); err != nil {
			return nil, err
		}
		active, err := pools.Active(ctx, tx, s.OwnerID())
		if err != nil {
			return nil, err
		}
		at := now().UTC()
		if err := pool.Release(s, active, at); err != nil {
			return nil, err
		}
		if err := sessions.Save(ctx, tx, s); err != nil {
			return nil, err
		}
		if err := fillPool(ctx, tx, pool, s.OwnerID(), active, at); err != nil {
			return nil, err
		}
		return SessionState(s), nil
	})
}

// fillPool starts the owner's Queued sessions, oldest first, until the
// pool is full or none waits. It runs under the owner's pool lock, in the
// transaction that freed the slots: releases that commit one after the
// other each see the sessions the previous one started, so no two of them
// pick the same session and every freed slot is taken. A Queued session
// that cannot start (its budget is spent) is passed over.
func fillPool(ctx context.Context, tx pgx.Tx, pool domain.SessionPool, owner uuid.UUID, active int, at time.Time) error {
	passed := map[uuid.UUID]bool{}
	for pool.CanAllocate(active) {
		line, err := pools.Queued(ctx, tx, owner, pool.MaxCount()-active+len(passed))
		if err != nil {
			return err
		}
		started := false
		for _, id := range line {
			if passed[id] || !pool.CanAllocate(active) {
				continue
			}
			s, err := sessions.Get(ctx, tx, id)
			if err != nil {
				return err
			}
			if err := pool.Allocate(s, active, at); err != nil {
				passed[id] = true
				continue
			}
			if err := sessions.Save(ctx, tx, s); err != nil {
				return err
			}
			active++
			started = true
		}
		if !started {
			return nil
		}
	}
	return nil
}
