package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/agentbus/agentbus/postgres"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgresIdempotency is the IdempotencyStore of the api, on the table of
// postgres.IdempotencyKeys: it adds the request hash check and the stored
// response's encoding.
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

func (s *PostgresIdempotency) keys() postgres.IdempotencyKeys {
	return postgres.IdempotencyKeys{DB: s.Pool}
}

func keyOf(k IdempotencyScope) postgres.IdempotencyKey {
	return postgres.IdempotencyKey{Scope: k.Caller, Method: k.Method, Path: k.Path, Key: k.Key}
}

// Begin implements IdempotencyStore.
func (s *PostgresIdempotency) Begin(ctx context.Context, k IdempotencyScope, requestHash [32]byte) (*StoredResponse, error) {
	// Two rounds: a key abandoned between the claim and the read is free
	// again, so claim once more.
	for range 2 {
		claimed, err := s.keys().Claim(ctx, keyOf(k), requestHash[:], s.lockTimeout(), s.ttl())
		if err != nil {
			return nil, fmt.Errorf("api: claim idempotency key: %w", err)
		}
		if claimed {
			return nil, nil
		}
		stored, err := s.keys().Get(ctx, keyOf(k))
		if errors.Is(err, postgres.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("api: read idempotency key: %w", err)
		}
		if !bytes.Equal(stored.RequestHash, requestHash[:]) {
			return nil, ErrIdempotencyMismatch
		}
		if stored.Status == nil {
			return nil, ErrIdempotencyInProgress
		}
		resp := &StoredResponse{Status: *stored.Status, Header: http.Header{}, Body: stored.Body}
		if len(stored.Headers) > 0 {
			if err := json.Unmarshal(stored.Headers, &resp.Header); err != nil {
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
	if err := s.keys().Complete(ctx, keyOf(k), resp.Status, headers, body); err != nil {
		return fmt.Errorf("api: store idempotent response: %w", err)
	}
	return nil
}

// Renew implements IdempotencyStore.
func (s *PostgresIdempotency) Renew(ctx context.Context, k IdempotencyScope) error {
	if err := s.keys().Renew(ctx, keyOf(k), s.lockTimeout()); err != nil {
		return fmt.Errorf("api: renew idempotency key: %w", err)
	}
	return nil
}

// Abandon implements IdempotencyStore.
func (s *PostgresIdempotency) Abandon(ctx context.Context, k IdempotencyScope) error {
	if err := s.keys().Release(ctx, keyOf(k)); err != nil {
		return fmt.Errorf("api: release idempotency key: %w", err)
	}
	return nil
}

// DeleteExpired removes the keys whose time is over and returns how many
// it removed; a periodic job may call it to keep the table small (expired
// keys are ignored, and reused, without it).
func (s *PostgresIdempotency) DeleteExpired(ctx context.Context) (int64, error) {
	n, err := s.keys().DeleteExpired(ctx)
	if err != nil {
		return 0, fmt.Errorf("api: delete expired idempotency keys: %w", err)
	}
	return n, nil
}
