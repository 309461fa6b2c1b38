package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgresIdempotency is the IdempotencyStore of the api, in the table
// idempotency_keys (migrations/002_idempotency.sql).
type PostgresIdempotency struct {
	// Pool is the database.
	Pool *pgxpool.Pool
	// TTL is how long a key is remembered; default 24h.
	TTL time.Duration
	// LockTimeout is how long a key stays held after its request last
	// renewed it (every second while it runs): once it passes, the process
	// that ran the request died, and a repeat takes the key over; default 5s.
	LockTimeout time.Duration
}

// NewPostgresIdempotency returns a store on pool with the default TTL and
// lock timeout.
func NewPostgresIdempotency(pool *pgxpool.Pool) *PostgresIdempotency {
	return &PostgresIdempotency{Pool: pool}
}

func (s *PostgresIdempotency) ttl() time.Duration {
	if s.TTL > 0 {
		return s.TTL
	}
	return 24 * time.Hour
}

func (s *PostgresIdempotency) lockTimeout() time.Duration {
	if s.LockTimeout > 0 {
		return s.LockTimeout
	}
	return 5 * time.Second
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

// Begin implements IdempotencyStore.
func (s *PostgresIdempotency) Begin(ctx context.Context, k IdempotencyScope, requestHash [32]byte) (*StoredResponse, error) {
	// Two rounds: a key abandoned between the claim and the read is free
	// again, so claim once more.
	for range 2 {
		var claimed bool
		err := s.Pool.QueryRow(ctx, claimSQL, k.Caller, k.Method, k.Path, k.Key, requestHash[:],
			s.lockTimeout(), s.ttl()).Scan(&claimed)
		if err == nil {
			return nil, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("api: claim idempotency key: %w", err)
		}
		var (
			hash    []byte
			status  *int
			headers []byte
			body    []byte
		)
		err = s.Pool.QueryRow(ctx, `
SELECT request_hash, status, headers, body FROM idempotency_keys
 WHERE scope = $1 AND method = $2 AND path = $3 AND key = $4`,
			k.Caller, k.Method, k.Path, k.Key).Scan(&hash, &status, &headers, &body)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("api: read idempotency key: %w", err)
		}
		if !bytes.Equal(hash, requestHash[:]) {
			return nil, ErrIdempotencyMismatch
		}
		if status == nil {
			return nil, ErrIdempotencyInProgress
		}
		resp := &StoredResponse{Status: *status, Header: http.Header{}, Body: body}
		if len(headers) > 0 {
			if err := json.Unmarshal(headers, &resp.Header); err != nil {
				return nil, fmt.Errorf("api: decode stored headers: %w", err)
			}
		}
		return resp, nil
	}
	return nil, ErrIdempotencyInProgress
}

// Finish implements IdempotencyStore.
func (s *PostgresIdempotency) Finish(ctx context.Context, k IdempotencyScope, resp StoredResponse) error {
	headers, err := json.Marshal(resp.Header)
	if err != nil {
		return err
	}
	body := resp.Body
	if body == nil {
		body = []byte{}
	}
	_, err = s.Pool.Exec(ctx, `
UPDATE idempotency_keys SET status = $5, headers = $6, body = $7
 WHERE scope = $1 AND method = $2 AND path = $3 AND key = $4 AND status IS NULL`,
		k.Caller, k.Method, k.Path, k.Key, resp.Status, headers, body)
	if err != nil {
		return fmt.Errorf("api: store idempotent response: %w", err)
	}
	return nil
}

// Renew implements IdempotencyStore.
func (s *PostgresIdempotency) Renew(ctx context.Context, k IdempotencyScope) error {
	_, err := s.Pool.Exec(ctx, `
UPDATE idempotency_keys SET locked_until = now() + $5::interval
 WHERE scope = $1 AND method = $2 AND path = $3 AND key = $4 AND status IS NULL`,
		k.Caller, k.Method, k.Path, k.Key, s.lockTimeout())
	if err != nil {
		return fmt.Errorf("api: renew idempotency key: %w", err)
	}
	return nil
}

// Abandon implements IdempotencyStore.
func (s *PostgresIdempotency) Abandon(ctx context.Context, k IdempotencyScope) error {
	_, err := s.Pool.Exec(ctx, `
DELETE FROM idempotency_keys
 WHERE scope = $1 AND method = $2 AND path = $3 AND key = $4 AND status IS NULL`,
		k.Caller, k.Method, k.Path, k.Key)
	if err != nil {
		return fmt.Errorf("api: release idempotency key: %w", err)
	}
	return nil
}

// DeleteExpired removes the keys whose time is over and returns how many
// it removed; a periodic job may call it to keep the table small (expired
// keys are ignored, and reused, without it).
func (s *PostgresIdempotency) DeleteExpired(ctx context.Context) (int64, error) {
	tag, err := s.Pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE expires_at < now()`)
	if err != nil {
		return 0, fmt.Errorf("api: delete expired idempotency keys: %w", err)
	}
	return tag.RowsAffected(), nil
}
