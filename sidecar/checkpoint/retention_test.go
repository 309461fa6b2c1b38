package checkpoint_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/sidecar/checkpoint"
)

// blobOf returns the id git gives content.
func blobOf(t *testing.T, content string) string {
	t.Helper()
	cmd := exec.Command("git", "hash-object", "--stdin")
	cmd.Stdin = strings.NewReader(content)
	out, err := cmd.Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// hasObject says whether the store holds the object id.
func hasObject(store checkpoint.Store, id string) bool {
	cmd := exec.Command("git", "--git-dir", store.Dir, "cat-file", "-e", id)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null")
	return cmd.Run() == nil
}

// unique returns n letters that differ from those of any other i and do
// not compress.
func unique(i, n int) string {
	rng := rand.New(rand.NewPCG(uint64(i), 7))
	buf := make([]byte, n)
	for j := range buf {
		buf[j] = byte('a' + rng.IntN(26))
	}
	return string(buf)
}

// TestRetentionDropsOldSnapshotsAndTheFilesOnlyTheyHeld takes five
// snapshots that each add a file of their own, keeps two: the three
// older are gone (their ref, their commit, the files only they held),
// the store shrinks, the two kept restore, and the next snapshot goes on.
func TestRetentionDropsOldSnapshotsAndTheFilesOnlyTheyHeld(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	dir, store := filepath.Join(root, "work"), checkpoint.Store{Dir: filepath.Join(root, "store.git")}
	write(t, dir, map[string]string{"shared.txt": "kept by all\n"})
	var snaps []checkpoint.Snapshot
	for i := 1; i <= 5; i++ {
		// Each turn replaces the last turn's file with one of its own.
		_ = os.Remove(filepath.Join(dir, fmt.Sprintf("turn%d.bin", i-1)))
		write(t, dir, map[string]string{fmt.Sprintf("turn%d.bin", i): unique(i, 50_000)})
		snap, err := store.Take(ctx, dir, fmt.Sprintf("turn %d", i))
		require.NoError(t, err)
		assert.Equal(t, int64(50_000+len("kept by all\n")), snap.Bytes, "turn %d", i)
		snaps = append(snaps, snap)
	}
	assert.Equal(t, int64(50_000+len("kept by all\n")), snaps[0].AddedBytes, "the first snapshot adds every file")
	assert.Equal(t, int64(50_000), snaps[4].AddedBytes, "a later one adds its own file")
	assert.Equal(t, 2, snaps[4].FilesChanged, "one file removed, one added")
	before, err := store.DiskBytes()
	require.NoError(t, err)

	dropped, err := store.Prune(ctx, checkpoint.Retention{Keep: 2}, time.Now())
	require.NoError(t, err)
	assert.Equal(t, []string{snaps[0].Commit, snaps[1].Commit, snaps[2].Commit}, dropped)
	kept, err := store.Snapshots(ctx)
	require.NoError(t, err)
	require.Len(t, kept, 2)
	assert.Equal(t, []string{snaps[3].Commit, snaps[4].Commit}, []string{kept[0].Commit, kept[1].Commit})
	for i := 1; i <= 3; i++ {
		assert.False(t, hasObject(store, blobOf(t, unique(i, 50_000))), "turn %d's own file is gone", i)
		assert.Error(t, store.Restore(ctx, filepath.Join(root, "gone"), snaps[i-1].Commit), "turn %d is gone", i)
	}
	assert.True(t, hasObject(store, blobOf(t, "kept by all\n")), "a file a kept snapshot holds stays")
	after, err := store.DiskBytes()
	require.NoError(t, err)
	assert.Less(t, after, before-100_000, "the store shrank by the files dropped (%d → %d bytes)", before, after)

	require.NoError(t, store.Restore(ctx, filepath.Join(root, "four"), snaps[3].Commit))
	assert.Equal(t, map[string]string{"shared.txt": "kept by all\n", "turn4.bin": unique(4, 50_000)}, tree(t, filepath.Join(root, "four")))
	next, err := store.Take(ctx, dir, "turn 6")
	require.NoError(t, err)
	head, err := store.Head(ctx)
	require.NoError(t, err)
	assert.Equal(t, next.Commit, head)

	t.Run("by age, the newest always kept", func(t *testing.T) {
		dropped, err := store.Prune(ctx, checkpoint.Retention{MaxAge: time.Hour}, time.Now().Add(2*time.Hour))
		require.NoError(t, err)
		assert.Equal(t, []string{snaps[3].Commit, snaps[4].Commit}, dropped)
		kept, err := store.Snapshots(ctx)
		require.NoError(t, err)
		require.Len(t, kept, 1)
		assert.Equal(t, next.Commit, kept[0].Commit)
		none, err := store.Prune(ctx, checkpoint.Retention{Keep: 1, MaxAge: time.Second}, time.Now().Add(time.Hour))
		require.NoError(t, err)
		assert.Empty(t, none)
	})
}

// TestAStoreOfOneChainOfSnapshotsGetsARefPerSnapshot opens a store whose
// snapshots form one chain under a single ref: each becomes a snapshot
// of its own, the next one follows them, and retention drops them.
func TestAStoreOfOneChainOfSnapshotsGetsARefPerSnapshot(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	dir, store := filepath.Join(root, "work"), checkpoint.Store{Dir: filepath.Join(root, "store.git")}
	git := func(stdin string, args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@localhost", "--git-dir", store.Dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null")
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	git("", "init", "-q", "--bare", store.Dir)
	var chain []string
	for i := 1; i <= 3; i++ {
		blob := git(fmt.Sprintf("turn %d\n", i), "hash-object", "-w", "--stdin")
		tree := git(fmt.Sprintf("100644 blob %s\tfile.txt\n", blob), "mktree")
		args := []string{"commit-tree", tree, "-m", fmt.Sprintf("turn %d", i)}
		if len(chain) > 0 {
			args = append(args, "-p", chain[len(chain)-1])
		}
		chain = append(chain, git("", args...))
	}
	git("", "update-ref", "refs/heads/checkpoints", chain[2])

	head, err := store.Head(ctx)
	require.NoError(t, err)
	assert.Equal(t, chain[2], head)
	write(t, dir, map[string]string{"file.txt": "turn 4\n"})
	four, err := store.Take(ctx, dir, "turn 4")
	require.NoError(t, err)
	assert.Equal(t, 1, four.FilesChanged, "compared with the chain's newest")
	kept, err := store.Snapshots(ctx)
	require.NoError(t, err)
	got := []string{}
	for _, k := range kept {
		got = append(got, k.Commit)
	}
	assert.Equal(t, append(chain, four.Commit), got)
	dropped, err := store.Prune(ctx, checkpoint.Retention{Keep: 1}, time.Now())
	require.NoError(t, err)
	assert.Equal(t, chain, dropped)
	assert.False(t, hasObject(store, chain[0]), "the chain is gone with its last snapshot")
}
