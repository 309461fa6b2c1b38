package main

import (
	"context"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/api"
)

// TestTokenCarriesTheConfiguredIssuerAndAudience: with AGENTBUS_JWT_ISSUER
// and AGENTBUS_JWT_AUDIENCE set, `agentbus token` signs them, the API built
// as the commands build it accepts its token, and refuses (unauthorized) a
// token without them or with others.
func TestTokenCarriesTheConfiguredIssuerAndAudience(t *testing.T) {
	t.Setenv(jwtSecretEnv, "s3cret")
	t.Setenv(jwtIssuerEnv, "https://id.example")
	t.Setenv(jwtAudienceEnv, "agentbus")
	srv, err := api.New(withJWTClaims(api.Config{JWTSecret: "s3cret", Workspace: "/workspace"}), api.Deps{})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	user := uuid.NewString()

	tok := captureStdout(t, func() error {
		return runToken(context.Background(), []string{"--user", user, "--data-dir", t.TempDir()})
	})
	var claims jwt.RegisteredClaims
	_, err = jwt.ParseWithClaims(tok, &claims, func(*jwt.Token) (any, error) { return []byte("s3cret"), nil })
	require.NoError(t, err)
	assert.Equal(t, "https://id.example", claims.Issuer)
	assert.Equal(t, jwt.ClaimStrings{"agentbus"}, claims.Audience)
	owner, err := srv.AuthenticateBearer("Bearer " + tok)
	require.NoError(t, err, "the token agentbus token prints is accepted")
	assert.Equal(t, user, owner)

	refused := map[string][]api.TokenOption{
		"neither":          nil,
		"another issuer":   {api.WithIssuer("https://evil.example"), api.WithAudience("agentbus")},
		"another audience": {api.WithIssuer("https://id.example"), api.WithAudience("billing")},
	}
	for name, opts := range refused {
		t.Run(name, func(t *testing.T) {
			other, err := api.NewToken("s3cret", user, time.Hour, opts...)
			require.NoError(t, err)
			_, err = srv.AuthenticateBearer("Bearer " + other)
			var k api.Kinded
			require.ErrorAs(t, err, &k)
			assert.Equal(t, api.KindUnauthorized, k.Kind())
		})
	}
}
