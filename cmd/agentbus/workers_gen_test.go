package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGeneratedFilesAreCurrent: the consumer files, nats/users.conf and
// the workers' part of compose.yaml are what `agentbus gen` writes from
// the workers' declarations, and no consumer file is left of a consumer
// no worker declares.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	files, err := generatedFiles("../..")
	require.NoError(t, err)
	for path, want := range files {
		got, err := os.ReadFile(filepath.Join("../..", path))
		if assert.NoError(t, err, "%s: run `go generate ./cmd/agentbus`", path) {
			assert.Equal(t, string(want), string(got), "%s is stale: run `go generate ./cmd/agentbus`", path)
		}
	}
	stale, err := staleFiles("../..", files)
	require.NoError(t, err)
	assert.Empty(t, stale, "files of consumers no worker declares: run `go generate ./cmd/agentbus`")
}

// TestGenWritesTheFiles: gen writes every generated file into a checkout
// and removes the consumer files no worker declares.
func TestGenWritesTheFiles(t *testing.T) {
	dir := t.TempDir()
	compose, err := os.ReadFile("../../compose.yaml")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "compose.yaml"), compose, 0o644))
	old := filepath.Join(dir, "nats/consumers/AGENTS_EVENTS/gone.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(old), 0o755))
	require.NoError(t, os.WriteFile(old, []byte("{}"), 0o644))

	require.NoError(t, runGen(t.Context(), []string{"--dir", dir}))

	files, err := generatedFiles(dir)
	require.NoError(t, err)
	for path, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, path))
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got), path)
	}
	assert.NoFileExists(t, old)
}
