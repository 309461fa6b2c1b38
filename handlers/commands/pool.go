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

// registerPool registers allocation, release and the pool's size. fallback
// is the pool of owners who set no size of their own.
func registerPool(d *Dispatcher, now Clock, fallback domain.SessionPool) {
	d.Register(domain.AggregateSession, command.AllocateSession, func(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
		s, err := sessions.Get(ctx, tx, cmd.AggregateID)
		if err != nil {
			return nil, err
		}
		pool, active, err := lockPool(ctx, tx, fallback, s.OwnerID())
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
		pool, active, err := lockPool(ctx, tx, fallback, s.OwnerID())
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
		if _, err := fillPool(ctx, tx, pool, s.OwnerID(), active, at); err != nil {
			return nil, err
		}
		return SessionState(s), nil
	})
	d.Register(command.PoolAggregate, command.ConfigurePool, func(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
		if err := checkOwner(cmd, cmd.AggregateID.String(), "pool"); err != nil {
			return nil, err
		}
		cfg, err := decode[domain.SessionPoolConfig](cmd)
		if err != nil {
			return nil, err
		}
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
		pool, err := domain.NewSessionPool(cfg)
		if err != nil {
			return nil, err
		}
		owner := cmd.AggregateID
		at := now().UTC()
		if err := pools.Lock(ctx, tx, owner); err != nil {
			return nil, err
		}
		if err := pools.SetConfig(ctx, tx, owner, cfg, at); err != nil {
			return nil, err
		}
		active, err := pools.Active(ctx, tx, owner)
		if err != nil {
			return nil, err
		}
		// Sessions beyond a smaller size keep their slots: they end in
		// their own time, and their releases start nobody until the
		// owner is below the new size.
		if active, err = fillPool(ctx, tx, pool, owner, active, at); err != nil {
			return nil, err
		}
		return pool.Utilization(active), nil
	})
}

// lockPool takes the owner's pool lock and returns the owner's pool and
// how many of its slots are taken.
func lockPool(ctx context.Context, tx pgx.Tx, fallback domain.SessionPool, owner uuid.UUID) (domain.SessionPool, int, error) {
	if err := pools.Lock(ctx, tx, owner); err != nil {
		return domain.SessionPool{}, 0, err
	}
	cfg, err := pools.Config(ctx, tx, owner)
	if err != nil {
		return domain.SessionPool{}, 0, err
	}
	pool := fallback
	if cfg.MaxConcurrentSessions > 0 {
		if pool, err = domain.NewSessionPool(cfg); err != nil {
			return domain.SessionPool{}, 0, err
		}
	}
	active, err := pools.Active(ctx, tx, owner)
	return pool, active, err
}

// fillPool starts the owner's Queued sessions, oldest first, until the
// pool is full or none waits, and returns how many slots are taken then.
// It runs under the owner's pool lock, in the transaction that freed the
// slots: releases that commit one after the other each see the sessions
// the previous one started, so no two of them pick the same session and
// every freed slot is taken. A Queued session that cannot start (its
// budget is spent) is passed over.
func fillPool(ctx context.Context, tx pgx.Tx, pool domain.SessionPool, owner uuid.UUID, active int, at time.Time) (int, error) {
	passed := map[uuid.UUID]bool{}
	for pool.CanAllocate(active) {
		line, err := pools.Queued(ctx, tx, owner, pool.MaxCount()-active+len(passed))
		if err != nil {
			return active, err
		}
		started := false
		for _, id := range line {
			if passed[id] || !pool.CanAllocate(active) {
				continue
			}
			s, err := sessions.Get(ctx, tx, id)
			if err != nil {
				return active, err
			}
			if err := pool.Allocate(s, active, at); err != nil {
				passed[id] = true
				continue
			}
			if err := sessions.Save(ctx, tx, s); err != nil {
				return active, err
			}
			active++
			started = true
		}
		if !started {
			break
		}
	}
	return active, nil
}
