// Package queries is agentbus's read side: the questions of seed 001
// section 8.7 (session detail, lists, history, queue, task list, plan,
// metrics, pool utilization) answered from the Postgres tables the
// commands worker writes. Every query that names a session is scoped to an
// owner: another owner's session is reported as not found, exactly like a
// session that does not exist, so ids cannot be probed.
//
// Store also finds the session of an agent API key and the owner of a
// session, for the HTTP API's authentication.
package queries

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/domain"
)

// DB is what the queries need of a database: a *pgxpool.Pool, a
// *pgx.Conn or a pgx.Tx.
type DB interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Paging limits.
const (
	// DefaultPageSize is the page size when none is asked for.
	DefaultPageSize = 20
	// MaxPageSize is the largest page a list returns.
	MaxPageSize = 100
)

// Store answers the read side's queries from Postgres. It is safe for
// concurrent use.
type Store struct {
	db   DB
	pool domain.SessionPool
	// Now is the clock for elapsed times of sessions still running;
	// time.Now when nil.
	Now func() time.Time
}

// New returns a Store on db. pool is the session pool whose size the pool
// utilization is measured against.
func New(db DB, pool domain.SessionPool) *Store {
	return &Store{db: db, pool: pool}
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// ErrNotFound matches every *NotFoundError.
var ErrNotFound = errors.New("not found")

// NotFoundError reports something that does not exist or is not the
// caller's. Its Kind is not_found, which the HTTP API answers with 404.
type NotFoundError struct {
	// Entity is the kind of thing looked for (session).
	Entity string
	// ID is the id looked for.
	ID string
}

// Error returns "session <id> not found".
func (e *NotFoundError) Error() string { return e.Entity + " " + e.ID + " not found" }

// Kind returns not_found.
func (e *NotFoundError) Kind() string { return "not_found" }

// Is reports whether target is ErrNotFound.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// Paging asks for one page of a list.
type Paging struct {
	// Page is the 1-based page number; values below 1 mean 1.
	Page int
	// PageSize is the number of items per page; 0 means DefaultPageSize,
	// and it is capped at MaxPageSize.
	PageSize int
}

// normalize returns the page and size actually served.
func (p Paging) normalize() Paging {
	if p.Page < 1 {
		p.Page = 1
	}
	switch {
	case p.PageSize <= 0:
		p.PageSize = DefaultPageSize
	case p.PageSize > MaxPageSize:
		p.PageSize = MaxPageSize
	}
	return p
}

func (p Paging) offset() int { return (p.Page - 1) * p.PageSize }

// Page is one page of a list and the size of the whole list.
type Page[T any] struct {
	// Items are the page's items.
	Items []T
	// Total is the number of items of the whole list.
	Total int
	// Page is the 1-based page number served.
	Page int
	// PageSize is the page size served.
	PageSize int
}
