package main

import (
	"os"
	"time"

	"github.com/agentbus/agentbus/api"
)

// The issuer and audience people's tokens must carry, when the operator
// sets them: an API refuses (401) a token without them, and the tokens
// this program signs (`agentbus token`, up's development token and its
// local socket's) carry them.
const (
	jwtIssuerEnv   = "AGENTBUS_JWT_ISSUER"
	jwtAudienceEnv = "AGENTBUS_JWT_AUDIENCE"
)

// withJWTClaims is cfg requiring the issuer and audience the environment
// sets.
func withJWTClaims(cfg api.Config) api.Config {
	cfg.JWTIssuer = os.Getenv(jwtIssuerEnv)
	cfg.JWTAudience = os.Getenv(jwtAudienceEnv)
	return cfg
}

// signToken signs a token for user with secret, carrying the issuer and
// audience the environment sets.
func signToken(secret, user string, ttl time.Duration) (string, error) {
	return api.NewToken(secret, user, ttl, api.WithIssuer(os.Getenv(jwtIssuerEnv)), api.WithAudience(os.Getenv(jwtAudienceEnv)))
}
