package commands

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
)

// ActiveSessions counts the owner's sessions that hold a pool slot. The
// caller holds the owner's pool lock, so the count stays true until commit.
func ActiveSessions(ctx context.Context, q postgres.Querier, owner uuid.UUID) (int, error) {
	statuses := make([]string, 0, 8)
	for _, s := range domain.PoolSlotStatuses() {
		statuses = append(statuses, string(s))
	}
	var n int
	err := q.QueryRow(ctx, "SELECT count(*) FROM sessions WHERE owner_id = $1 AND status = ANY($2)", owner, statuses).Scan(&n)
	return n, err
}

// lockPool serialises the allocations of one owner, so two sessions never
// both take the last slot.
func lockPool(ctx context.Context, tx pgx.Tx, owner uuid.UUID) error {
	_, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", "pool:"+owner.String())
	return err
}

func registerPool(d *Dispatcher, now Clock, pool domain.SessionPool) {
	d.Register(domain.AggregateSession, command.AllocateSession, func(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
		s, err := sessions.Get(ctx, tx, cmd.AggregateID)
		if err != nil {
			return nil, err
		}
		if err := lockPool(ctx, tx, s.OwnerID()); err != nil {
			return nil, err
		}
		active, err := ActiveSessions(ctx, tx, s.OwnerID())
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
		if err := lockPool(ctx, tx, s.OwnerID()); err != nil {
			return nil, err
		}
		active, err := ActiveSessions(ctx, tx, s.OwnerID())
		if err != nil {
			return nil, err
		}
		if err := pool.Release(s, active, now().UTC()); err != nil {
			return nil, err
		}
		if err := sessions.Save(ctx, tx, s); err != nil {
			return nil, err
		}
		return SessionState(s), nil
	})
}
