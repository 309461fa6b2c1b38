package domain

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
)

// APIKeyPrefix starts every session API key, so a leaked key is easy to
// recognise in logs and secret scanners.
const APIKeyPrefix = "abk_"

// apiKeyEntropyBytes is the key's randomness (256 bits).
const apiKeyEntropyBytes = 32

// HashAPIKey returns the hex SHA-256 of a plaintext key: what is stored,
// and what the agent API looks a presented key up by.
func HashAPIKey(plaintext string) string {
	sum := sha256.Sum256([]byte(plaintext))
	return hex.EncodeToString(sum[:])
}

// GenerateAPIKey creates the session's agent API key from entropy (pass
// crypto/rand.Reader), stores only its SHA-256 and returns the plaintext,
// which is never available again. It is allowed while the session is
// Queued: a retried session gets a fresh key for its new sidecar, and once
// started the hash is immutable.
func (s *AgentSession) GenerateAPIKey(entropy io.Reader) (string, error) {
	if err := s.allow(OpGenerateAPIKey); err != nil {
		return "", err
	}
	key, err := newAPIKey(entropy)
	if err != nil {
		return "", err
	}
	s.apiKeyHash = HashAPIKey(key)
	return key, nil
}

// IssueSidecarKey creates a second agent API key of the session, for the
// sidecar a runtime starts for it: the key GenerateAPIKey made went to
// whoever started the session, once, and never travels over the bus. It
// is allowed while the session has a sidecar. Each call replaces the
// previous sidecar key (a sidecar started again gets a new one); the
// session's own key stays valid.
//
// engine is the sidecar engine of the runtime asking. The first key pins
// it to the session: the agent's conversation lives in that engine, so a
// runtime of another engine gets ErrEngineMismatch and starts nothing,
// and the session waits for one that runs its engine.
func (s *AgentSession) IssueSidecarKey(entropy io.Reader, engine string) (string, error) {
	if err := s.allow(OpIssueSidecarKey); err != nil {
		return "", err
	}
	if engine == "" {
		return "", invalid("engine", "the runtime's engine is required")
	}
	if s.engine != "" && s.engine != engine {
		return "", s.refuse(OpIssueSidecarKey, fmt.Errorf("%w: the session runs on %s, not %s", ErrEngineMismatch, s.engine, engine))
	}
	key, err := newAPIKey(entropy)
	if err != nil {
		return "", err
	}
	s.sidecarKeyHash = HashAPIKey(key)
	s.engine = engine
	return key, nil
}

func newAPIKey(entropy io.Reader) (string, error) {
	if entropy == nil {
		return "", invalid("entropy", "a random source is required")
	}
	buf := make([]byte, apiKeyEntropyBytes)
	if _, err := io.ReadFull(entropy, buf); err != nil {
		return "", fmt.Errorf("generate api key: %w", err)
	}
	return APIKeyPrefix + base64.RawURLEncoding.EncodeToString(buf), nil
}

// VerifyAPIKey reports, in constant time, whether plaintext is the
// session's key or its sidecar's.
func (s *AgentSession) VerifyAPIKey(plaintext string) bool {
	if !strings.HasPrefix(plaintext, APIKeyPrefix) {
		return false
	}
	hash := []byte(HashAPIKey(plaintext))
	own := s.apiKeyHash != "" && subtle.ConstantTimeCompare(hash, []byte(s.apiKeyHash)) == 1
	sidecar := s.sidecarKeyHash != "" && subtle.ConstantTimeCompare(hash, []byte(s.sidecarKeyHash)) == 1
	return own || sidecar
}
