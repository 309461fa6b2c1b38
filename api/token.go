package api

import (
	"errors"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// jwtLeeway tolerates clock skew between the token's issuer and this server.
const jwtLeeway = 30 * time.Second

// TokenOption sets a claim of a token NewToken signs.
type TokenOption func(*jwt.RegisteredClaims)

// WithIssuer sets the token's iss, which an API configured with
// Config.JWTIssuer requires; an empty issuer sets nothing.
func WithIssuer(issuer string) TokenOption {
	return func(c *jwt.RegisteredClaims) { c.Issuer = issuer }
}

// WithAudience sets the token's aud, which an API configured with
// Config.JWTAudience requires; an empty audience sets nothing.
func WithAudience(audience string) TokenOption {
	return func(c *jwt.RegisteredClaims) {
		if audience != "" {
			c.Audience = jwt.ClaimStrings{audience}
		}
	}
}

// NewToken returns an HS256 JWT for userID (its sub), valid for ttl, signed
// with secret: the development token `agentbus token` prints, which an API
// configured with the same JWTSecret (and the issuer and audience the
// options set) accepts.
func NewToken(secret, userID string, ttl time.Duration, opts ...TokenOption) (string, error) {
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
	for _, o := range opts {
		o(&claims)
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
}
