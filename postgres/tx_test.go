package postgres_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/postgres"
)

// countingPool is a pool of one connection that counts what it sends to
// the server: each write is one flight of messages, so one round trip.
func countingPool(t *testing.T) (*pgxpool.Pool, *atomic.Int64) {
	cfg, err := pgxpool.ParseConfig(testenv.PostgresURL(t))
	require.NoError(t, err)
	cfg.MaxConns = 1
	writes := &atomic.Int64{}
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, writes: writes}, nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(context.Background(), "CREATE TABLE tx_probe (n int PRIMARY KEY)")
	require.NoError(t, err)
	return pool, writes
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// commandLike is a command's transaction: read, a batch of writes, commit.
func commandLike(ctx context.Context, n int) func(pgx.Tx) error {
	return func(tx pgx.Tx) error {
		var count int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM tx_probe WHERE n < $1", n).Scan(&count); err != nil {
			return err
		}
		b := &pgx.Batch{}
		b.Queue("INSERT INTO tx_probe (n) VALUES ($1)", n)
		b.Queue("INSERT INTO tx_probe (n) VALUES ($1)", n+1)
		return tx.SendBatch(ctx, b).Close()
	}
}

func probes(t *testing.T, pool *pgxpool.Pool) []int {
	rows, err := pool.Query(context.Background(), "SELECT n FROM tx_probe ORDER BY n")
	require.NoError(t, err)
	ns, err := pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	return ns
}

// TestInTxSendsBeginWithTheFirstStatement: a command's transaction in
// InTx commits what it wrote and takes one round trip less than the same
// transaction begun by pgx, whose BEGIN travels alone.
func TestInTxSendsBeginWithTheFirstStatement(t *testing.T) {
	ctx := context.Background()
	pool, writes := countingPool(t)
	// Both ways once, so that every statement is prepared and cached.
	require.NoError(t, pgx.BeginFunc(ctx, pool, commandLike(ctx, 10)))
	require.NoError(t, postgres.InTx(ctx, pool, commandLike(ctx, 20)))

	before := writes.Load()
	require.NoError(t, pgx.BeginFunc(ctx, pool, commandLike(ctx, 30)))
	byPgx := writes.Load() - before
	before = writes.Load()
	require.NoError(t, postgres.InTx(ctx, pool, commandLike(ctx, 40)))
	inTx := writes.Load() - before

	assert.Equal(t, byPgx-1, inTx, "round trips of the same transaction: pgx %d, InTx %d", byPgx, inTx)
	assert.Equal(t, []int{10, 11, 20, 21, 30, 31, 40, 41}, probes(t, pool))
}

// TestInTxRollsBackWhatFailed: an error of fn, a failed first statement
// and a failed write each roll the whole transaction back, and leave the
// pool's one connection usable for the next transaction.
func TestInTxRollsBackWhatFailed(t *testing.T) {
	ctx := context.Background()
	pool, writes := countingPool(t)
	refused := errors.New("refused")

	err := postgres.InTx(ctx, pool, func(tx pgx.Tx) error {
		if err := commandLike(ctx, 10)(tx); err != nil {
			return err
		}
		return refused
	})
	require.ErrorIs(t, err, refused)

	err = postgres.InTx(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO tx_probe (n) VALUES ('not a number')")
		return err
	})
	require.Error(t, err, "a failed first statement fails the transaction")

	err = postgres.InTx(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO tx_probe (n) VALUES (20)"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO tx_probe (n) VALUES (20)")
		return err
	})
	require.True(t, postgres.IsUniqueViolation(err), "the second insert violates the key: %v", err)

	assert.Empty(t, probes(t, pool), "nothing of a failed transaction stays")
	require.NoError(t, postgres.InTx(ctx, pool, commandLike(ctx, 30)))
	assert.Equal(t, []int{30, 31}, probes(t, pool))

	before := writes.Load()
	require.NoError(t, postgres.InTx(ctx, pool, func(pgx.Tx) error { return nil }))
	assert.Equal(t, before, writes.Load(), "a transaction that ran nothing sends nothing")
}

// TestInTxCommitsWithTheLastBatch: with its COMMIT queued on its last
// batch, the transaction takes two round trips less than pgx's, commits
// what it wrote, and refuses to run anything after that batch, which
// would run outside the transaction.
func TestInTxCommitsWithTheLastBatch(t *testing.T) {
	ctx := context.Background()
	pool, writes := countingPool(t)
	committing := func(n int) func(pgx.Tx) error {
		return func(tx pgx.Tx) error {
			var count int
			if err := tx.QueryRow(ctx, "SELECT count(*) FROM tx_probe WHERE n < $1", n).Scan(&count); err != nil {
				return err
			}
			b := &pgx.Batch{}
			b.Queue("INSERT INTO tx_probe (n) VALUES ($1)", n)
			b.Queue("INSERT INTO tx_probe (n) VALUES ($1)", n+1)
			postgres.QueueCommit(b)
			return tx.SendBatch(ctx, b).Close()
		}
	}
	require.NoError(t, pgx.BeginFunc(ctx, pool, commandLike(ctx, 10)))
	require.NoError(t, postgres.InTx(ctx, pool, committing(20)))

	before := writes.Load()
	require.NoError(t, pgx.BeginFunc(ctx, pool, commandLike(ctx, 30)))
	byPgx := writes.Load() - before
	before = writes.Load()
	require.NoError(t, postgres.InTx(ctx, pool, committing(40)))
	inTx := writes.Load() - before
	assert.Equal(t, byPgx-2, inTx, "round trips of the same transaction: pgx %d, InTx %d", byPgx, inTx)

	err := postgres.InTx(ctx, pool, func(tx pgx.Tx) error {
		if err := committing(50)(tx); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO tx_probe (n) VALUES (60)")
		return err
	})
	require.Error(t, err, "nothing runs after the commit")
	assert.Equal(t, []int{10, 11, 20, 21, 30, 31, 40, 41, 50, 51}, probes(t, pool),
		"what the batch committed stays; what came after never ran")
}
