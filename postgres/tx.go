package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// InTx runs fn in a transaction on a connection of pool and commits it
// when fn returns nil, like pgx.BeginFunc, but without a round trip of its
// own for BEGIN: BEGIN is sent in one batch with the transaction's first
// statement. A command's transaction (load, writes, commit) then
// takes three round trips instead of four.
func InTx(ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) error) (err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A connection left inside a transaction is destroyed on release, not
	// handed to the next caller.
	defer conn.Release()
	tx := &pipelinedTx{conn: conn.Conn()}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// QueueCommit queues the COMMIT of an InTx transaction as the last query
// of b, so that the transaction's last writes and its commit share one
// round trip. Nothing may run in the transaction after b. Every query
// before it must fail in the server when the transaction may not commit
// (see checkedVersionedUpdate): a check of a result in the client, by a
// callback of b, would only run once the commit is done.
func QueueCommit(b *pgx.Batch) { b.Queue(commitSQL) }

const commitSQL = "COMMIT"

// errCommitted: a transaction committed by its batch (QueueCommit) runs
// nothing more.
var errCommitted = errors.New("postgres: the transaction was committed with its last batch")

// pipelinedTx is a pgx.Tx begun by its first statement: that statement
// goes out in one batch with BEGIN (pgx's Batch.BeginTx), and the
// transaction that batch begins takes over from there. Until then nothing
// was sent, so a transaction that ran nothing commits and rolls back
// without a round trip.
type pipelinedTx struct {
	conn   *pgx.Conn
	tx     pgx.Tx // nil until begun
	closed bool
	// committing is set once a batch that ends with COMMIT was sent.
	committing bool
}

var _ pgx.Tx = (*pipelinedTx)(nil)

// begin begins the transaction on its own, for the calls that cannot
// carry BEGIN along.
func (t *pipelinedTx) begin(ctx context.Context) (pgx.Tx, error) {
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	if t.tx == nil {
		tx, err := t.conn.Begin(ctx)
		if err != nil {
			return nil, err
		}
		t.tx = tx
	}
	return t.tx, nil
}

func (t *pipelinedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.closed {
		return pgx.FailedBatchResults(b, pgx.ErrTxClosed)
	}
	if t.committing {
		return pgx.FailedBatchResults(b, errCommitted)
	}
	if n := len(b.QueuedQueries); n > 0 && b.QueuedQueries[n-1].SQL == commitSQL {
		t.committing = true
	}
	if t.tx != nil {
		return t.tx.SendBatch(ctx, b)
	}
	begin := &pgx.Batch{}
	begin.BeginTx(pgx.TxOptions{})
	begin.QueuedQueries = append(begin.QueuedQueries, b.QueuedQueries...)
	br := t.conn.SendBatch(ctx, begin)
	t.tx = br.Tx()
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return pgx.FailedBatchResults(b, err)
	}
	return br
}

func (t *pipelinedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.committing {
		return pgconn.CommandTag{}, errCommitted
	}
	if t.tx != nil || t.closed {
		tx, err := t.begin(ctx)
		if err != nil {
			return pgconn.CommandTag{}, err
		}
		return tx.Exec(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.SendBatch(ctx, b)
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (t *pipelinedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.committing {
		return nil, errCommitted
	}
	if t.tx != nil || t.closed {
		tx, err := t.begin(ctx)
		if err != nil {
			return nil, err
		}
		return tx.Query(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.SendBatch(ctx, b)
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (t *pipelinedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := t.Query(ctx, sql, args...)
	return firstRow{rows: rows, err: err}
}

func (t *pipelinedTx) Commit(ctx context.Context) error {
	if t.committing && !t.closed {
		t.closed = true
		if t.conn.PgConn().TxStatus() == 'I' {
			return nil
		}
		// The batch with the COMMIT failed and its error went unread.
		_ = t.tx.Rollback(ctx)
		return pgx.ErrTxCommitRollback
	}
	if t.tx == nil {
		if t.closed {
			return pgx.ErrTxClosed
		}
		t.closed = true
		return nil
	}
	return t.tx.Commit(ctx)
}

func (t *pipelinedTx) Rollback(ctx context.Context) error {
	if t.committing && !t.closed && t.conn.PgConn().TxStatus() == 'I' {
		// Committed, or ended by the failure of the batch that was to.
		t.closed = true
		return nil
	}
	if t.tx == nil {
		if t.closed {
			return pgx.ErrTxClosed
		}
		t.closed = true
		return nil
	}
	return t.tx.Rollback(ctx)
}

func (t *pipelinedTx) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := t.begin(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Begin(ctx)
}

func (t *pipelinedTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	tx, err := t.begin(ctx)
	if err != nil {
		return 0, err
	}
	return tx.CopyFrom(ctx, table, columns, src)
}

// LargeObjects begins the transaction first, with no context to bound
// that: pgx's interface gives none.
func (t *pipelinedTx) LargeObjects() pgx.LargeObjects {
	tx, err := t.begin(context.Background())
	if err != nil {
		// The large objects of a closed transaction fail with ErrTxClosed.
		closed := &pgx.Batch{}
		closed.BeginTx(pgx.TxOptions{})
		tx = pgx.FailedBatchResults(closed, err).Tx()
	}
	return tx.LargeObjects()
}

func (t *pipelinedTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	tx, err := t.begin(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Prepare(ctx, name, sql)
}

func (t *pipelinedTx) Conn() *pgx.Conn { return t.conn }

// batchRows are the rows of the one query of a batch, which is closed
// with them so that the connection can be used again.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.err = r.br.Close()
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// firstRow is pgx's QueryRow over rows: the first row, or pgx.ErrNoRows.
type firstRow struct {
	rows pgx.Rows
	err  error
}

func (r firstRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}
