package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/api"
)

// TestUpGeneratesTheSecretThatTokenSignsWith: without AGENTBUS_JWT_SECRET,
// up's secret is random, kept in its data directory for the owner only,
// the same on every start; `agentbus token` on that directory signs with
// it, and the public development secret signs nothing it accepts.
func TestUpGeneratesTheSecretThatTokenSignsWith(t *testing.T) {
	t.Setenv(jwtSecretEnv, "")
	dir := t.TempDir()
	secret, err := dataDirSecret(dir, true)
	require.NoError(t, err)
	assert.NotEqual(t, api.DevJWTSecret, secret)
	assert.Len(t, secret, 64, "256 random bits, hex")
	info, err := os.Stat(filepath.Join(dir, jwtSecretFile))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	again, err := dataDirSecret(dir, true)
	require.NoError(t, err)
	assert.Equal(t, secret, again, "kept across starts")
	other, err := dataDirSecret(t.TempDir(), true)
	require.NoError(t, err)
	assert.NotEqual(t, secret, other, "each data directory has its own")

	user := uuid.NewString()
	tok := captureStdout(t, func() error { return runToken(context.Background(), []string{"--user", user, "--data-dir", dir}) })
	claims := jwt.RegisteredClaims{}
	_, err = jwt.ParseWithClaims(tok, &claims, func(*jwt.Token) (any, error) { return []byte(secret), nil })
	require.NoError(t, err, "token signs with up's secret")
	assert.Equal(t, user, claims.Subject)
	_, err = jwt.ParseWithClaims(tok, &jwt.RegisteredClaims{}, func(*jwt.Token) (any, error) { return []byte(api.DevJWTSecret), nil })
	assert.Error(t, err, "not with the public one")

	forged, err := api.NewToken(api.DevJWTSecret, user, time.Hour)
	require.NoError(t, err)
	_, err = jwt.ParseWithClaims(forged, &jwt.RegisteredClaims{}, func(*jwt.Token) (any, error) { return []byte(secret), nil })
	assert.Error(t, err, "a token anyone can mint is refused")

	require.NoError(t, os.Chmod(filepath.Join(dir, jwtSecretFile), 0o644))
	_, err = dataDirSecret(dir, true)
	assert.ErrorContains(t, err, "readable by others")
}

// TestAPIWithoutASecretRefusesToStart: the api alone has no data directory;
// without AGENTBUS_JWT_SECRET it starts only when --dev asks for the public
// development secret.
func TestAPIWithoutASecretRefusesToStart(t *testing.T) {
	t.Setenv(jwtSecretEnv, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := runAPI(ctx, []string{"--database-url", "postgres://127.0.0.1:1/none", "--nats-url", "nats://127.0.0.1:1", "--http", "127.0.0.1:0"})
	require.Error(t, err)
	assert.ErrorContains(t, err, jwtSecretEnv)

	secret, err := standaloneSecret(true)
	require.NoError(t, err)
	assert.Equal(t, api.DevJWTSecret, secret, "--dev is the explicit way to the public secret")
	t.Setenv(jwtSecretEnv, "s3cret")
	secret, err = standaloneSecret(false)
	require.NoError(t, err)
	assert.Equal(t, "s3cret", secret)
}

func captureStdout(t *testing.T, f func() error) string {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	old := os.Stdout
	os.Stdout = w
	ferr := f()
	os.Stdout = old
	require.NoError(t, w.Close())
	out, err := io.ReadAll(r)
	require.NoError(t, err)
	require.NoError(t, ferr)
	return strings.TrimSpace(string(out))
}
