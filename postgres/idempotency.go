package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// IdempotencyKey names one idempotency key: who sent it, to which route.
type IdempotencyKey struct {
	// Scope is the caller: user:<owner id> or agent:<session id>.
	Scope string
	// Method and Path are the request's route.
	Method, Path string
	// Key is the Idempotency-Key header.
	Key string
}

// IdempotencyRecord is what the table holds of a key.
type IdempotencyRecord struct {
	// RequestHash is the hash of the first request with the key.
	RequestHash []byte
	// Status is nil while that request runs, then its response's status.
	Status *int
	// Headers (JSON) and Body are the response's.
	Headers, Body []byte
}

// IdempotencyDB is what IdempotencyKeys needs of a database: a pool.
type IdempotencyDB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// IdempotencyKeys is the table idempotency_keys
// (migrations/002_idempotency.sql): the first response to each key, and
// the lock of the request that is producing it.
type IdempotencyKeys struct {
	DB IdempotencyDB
}

// claimSQL takes the key when it is new, expired, or held by a request
// whose lock ran out; otherwise it returns no row.
const claimSQL = `
INSERT INTO idempotency_keys (scope, method, path, key, request_hash, locked_until, expires_at)
VALUES ($1, $2, $3, $4, $5, now() + $6::interval, now() + $7::interval)
ON CONFLICT (scope, method, path, key) DO UPDATE
   SET request_hash = EXCLUDED.request_hash, status = NULL, headers = NULL, body = NULL,
       created_at = now(), locked_until = EXCLUDED.locked_until, expires_at = EXCLUDED.expires_at
 WHERE idempotency_keys.expires_at < now()
    OR (idempotency_keys.status IS NULL AND idempotency_keys.locked_until < now())
RETURNING true`

// Claim takes k for the request of requestHash, held for lock and
// remembered for ttl, and reports whether it did: false when another
// request holds it or its response is stored.
func (t IdempotencyKeys) Claim(ctx context.Context, k IdempotencyKey, requestHash []byte, lock, ttl time.Duration) (bool, error) {
	var claimed bool
	err := t.DB.QueryRow(ctx, claimSQL, k.Scope, k.Method, k.Path, k.Key, requestHash, lock, ttl).Scan(&claimed)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// Get returns what the table holds of k; ErrNotFound when nothing.
func (t IdempotencyKeys) Get(ctx context.Context, k IdempotencyKey) (IdempotencyRecord, error) {
	var r IdempotencyRecord
	err := t.DB.QueryRow(ctx, `
SELECT request_hash, status, headers, body FROM idempotency_keys
 WHERE scope = $1 AND method = $2 AND path = $3 AND key = $4`,
		k.Scope, k.Method, k.Path, k.Key).Scan(&r.RequestHash, &r.Status, &r.Headers, &r.Body)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, ErrNotFound
	}
	return r, err
}

// Complete stores the response of the request that holds k.
func (t IdempotencyKeys) Complete(ctx context.Context, k IdempotencyKey, status int, headers, body []byte) error {
	_, err := t.DB.Exec(ctx, `
UPDATE idempotency_keys SET status = $5, headers = $6, body = $7
 WHERE scope = $1 AND method = $2 AND path = $3 AND key = $4 AND status IS NULL`,
		k.Scope, k.Method, k.Path, k.Key, status, headers, body)
	return err
}

// Renew holds k for lock more, while its request runs.
func (t IdempotencyKeys) Renew(ctx context.Context, k IdempotencyKey, lock time.Duration) error {
	_, err := t.DB.Exec(ctx, `
UPDATE idempotency_keys SET locked_until = now() + $5::interval
 WHERE scope = $1 AND method = $2 AND path = $3 AND key = $4 AND status IS NULL`,
		k.Scope, k.Method, k.Path, k.Key, lock)
	return err
}

// Release frees k when its request ended without a response to keep.
func (t IdempotencyKeys) Release(ctx context.Context, k IdempotencyKey) error {
	_, err := t.DB.Exec(ctx, `
DELETE FROM idempotency_keys
 WHERE scope = $1 AND method = $2 AND path = $3 AND key = $4 AND status IS NULL`,
		k.Scope, k.Method, k.Path, k.Key)
	return err
}

// DeleteExpired removes the keys whose time is over and returns how many.
func (t IdempotencyKeys) DeleteExpired(ctx context.Context) (int64, error) {
	tag, err := t.DB.Exec(ctx, `DELETE FROM idempotency_keys WHERE expires_at < now()`)
	return tag.RowsAffected(), err
}
