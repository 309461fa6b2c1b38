package checkpoint_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/sidecar/checkpoint"
)

// TestADiffListsTheFilesAndTheTextChangesWithinItsBound compares two
// snapshots: a file added, one removed, a text file changed with its
// unified diff, a binary one without, and a large one past the bound.
func TestADiffListsTheFilesAndTheTextChangesWithinItsBound(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	dir, store := filepath.Join(root, "work"), checkpoint.Store{Dir: filepath.Join(root, "store.git")}
	write(t, dir, map[string]string{"a.txt": "one\ntwo\nthree\n", "gone.txt": "bye\n", "bin.dat": "\x00\x01\x02",
		"big.txt": strings.Repeat("line\n", 1000), "same.txt": "same\n"})
	one, err := store.Take(ctx, dir, "turn 1")
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(dir, "gone.txt")))
	write(t, dir, map[string]string{"a.txt": "one\n2\nthree\n", "new dir/b.txt": "new\n", "bin.dat": "\x00\x03",
		"big.txt": strings.Repeat("LINE\n", 1000)})
	two, err := store.Take(ctx, dir, "turn 2")
	require.NoError(t, err)

	files, err := store.Diff(ctx, one.Commit, two.Commit, 1000)
	require.NoError(t, err)
	byPath := map[string]checkpoint.FileDiff{}
	var paths []string
	for _, f := range files {
		byPath[f.Path] = f
		paths = append(paths, f.Path)
	}
	assert.Equal(t, []string{"a.txt", "big.txt", "bin.dat", "gone.txt", "new dir/b.txt"}, paths, "same.txt did not change")
	a := byPath["a.txt"]
	assert.Equal(t, checkpoint.Changed, a.Status)
	assert.Equal(t, int64(14), a.OldBytes)
	assert.Equal(t, int64(12), a.NewBytes)
	assert.Equal(t, "@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n", a.Patch)
	assert.True(t, byPath["bin.dat"].Binary)
	assert.Empty(t, byPath["bin.dat"].Patch)
	assert.Empty(t, byPath["big.txt"].Patch)
	assert.Contains(t, byPath["big.txt"].Omitted, "bound")
	assert.Equal(t, checkpoint.Removed, byPath["gone.txt"].Status)
	assert.Equal(t, "@@ -1 +0,0 @@\n-bye\n", byPath["gone.txt"].Patch)
	assert.Equal(t, checkpoint.Added, byPath["new dir/b.txt"].Status)
	assert.Equal(t, int64(4), byPath["new dir/b.txt"].NewBytes)
	assert.Equal(t, "@@ -0,0 +1 @@\n+new\n", byPath["new dir/b.txt"].Patch)

	same, err := store.Diff(ctx, two.Commit, two.Commit, 1000)
	require.NoError(t, err)
	assert.Empty(t, same)
	_, err = store.Diff(ctx, one.Commit, "HEAD", 1000)
	assert.Error(t, err)
}
