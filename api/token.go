package api

import (
	"errors"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// jwtLeeway tolerates clock skew between the token's issuer and this server.
const jwtLeeway = 30 * time.Second

// NewToken returns an HS256 JWT for userID (its sub), valid for ttl, signed
// with secret: the development token `agentbus token` prints, which an API
// configured with the same JWTSecret accepts.
func NewToken(secret, userID string, ttl time.Duration) (string, error) {
	if secret == "" {
		return "", errors.New("api: empty JWT secret")
	}
	if userID == "" {
		return "", errors.New("api: empty user id")
	}
	if ttl <= 0 {
		return "", errors.New("api: token ttl must be positive")
	}
	now := time.Now()
	claims := jwt.RegisteredClaims{
		Subject:   userID,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
}
