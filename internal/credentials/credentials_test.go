package credentials_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/credentials"
)

func TestAPasswordIsGeneratedOnceAndKeptPrivate(t *testing.T) {
	dir := t.TempDir()
	first, err := credentials.Password(dir, "postgres")
	require.NoError(t, err)
	assert.Len(t, first, 48)
	again, err := credentials.Password(dir, "postgres")
	require.NoError(t, err)
	assert.Equal(t, first, again, "a second call reads the kept password")
	other, err := credentials.Password(dir, "redis")
	require.NoError(t, err)
	assert.NotEqual(t, first, other)

	info, err := os.Stat(filepath.Join(dir, "credentials", "postgres"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	require.NoError(t, os.Chmod(filepath.Join(dir, "credentials", "postgres"), 0o644))
	_, err = credentials.Password(dir, "postgres")
	assert.ErrorContains(t, err, "readable by others")

	_, err = credentials.Password(dir, "../escape")
	assert.Error(t, err)
}

func TestTheEnvFileKeepsWhatItHoldsAndIsPrivate(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, credentials.WriteEnv(dir, map[string]string{"DATABASE_URL": "postgres://a:b@127.0.0.1:1/x"}))
	require.NoError(t, credentials.WriteEnv(dir, map[string]string{"NATS_URL": "nats://operator:p@127.0.0.1:4222"}))
	env, err := credentials.ReadEnv(dir)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"DATABASE_URL": "postgres://a:b@127.0.0.1:1/x", "NATS_URL": "nats://operator:p@127.0.0.1:4222"}, env)
	info, err := os.Stat(filepath.Join(dir, credentials.EnvFile))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	assert.Error(t, credentials.WriteEnv(dir, map[string]string{"A": "two\nlines"}))
}
