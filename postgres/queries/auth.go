package queries

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// LookupSession returns the session whose agent API key (its own or its
// sidecar's) has the SHA-256 keyHash, and its owner; a *NotFoundError when no session has it. The
// stored hash is hex (domain.HashAPIKey), so this is an index lookup of
// the hex form: equality of hashes reveals nothing about the key, so no
// constant-time comparison is needed. It implements api.AgentKeys.
func (s *Store) LookupSession(ctx context.Context, keyHash [32]byte) (uuid.UUID, string, error) {
	var id, owner uuid.UUID
	err := s.db.QueryRow(ctx, "SELECT id, owner_id FROM sessions WHERE api_key_hash = $1 OR sidecar_key_hash = $1", hex.EncodeToString(keyHash[:])).
		Scan(&id, &owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return uuid.Nil, "", &NotFoundError{Entity: "agent key", ID: "(hidden)"}
	}
	if err != nil {
		return uuid.Nil, "", fmt.Errorf("queries: agent key: %w", err)
	}
	return id, owner.String(), nil
}

// Owner returns the owner of session id; a *NotFoundError when there is
// no such session. It implements api.SessionOwners.
func (s *Store) Owner(ctx context.Context, id uuid.UUID) (string, error) {
	var owner uuid.UUID
	err := s.db.QueryRow(ctx, "SELECT owner_id FROM sessions WHERE id = $1", id).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", &NotFoundError{Entity: "session", ID: id.String()}
	}
	if err != nil {
		return "", fmt.Errorf("queries: owner of %s: %w", id, err)
	}
	return owner.String(), nil
}
