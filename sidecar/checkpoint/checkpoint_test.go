package checkpoint_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/sidecar/checkpoint"
)

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

// tree returns the files under dir and their contents, .git excluded.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() {
			if info.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		raw, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = string(raw)
		return err
	}))
	return out
}

func TestSnapshotsRestoreEachTurnsFiles(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	dir, store := filepath.Join(root, "work"), checkpoint.Store{Dir: filepath.Join(root, "store.git")}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	write(t, dir, map[string]string{".gitignore": "build/\n", "a.txt": "one", "build/out.bin": "ignored"})

	s1, err := store.Take(ctx, dir, "turn 1")
	require.NoError(t, err)
	assert.Equal(t, 2, s1.FilesChanged, ".gitignore and a.txt; build/ is ignored")
	after1 := tree(t, dir)

	write(t, dir, map[string]string{"a.txt": "two", "b/c.txt": "new"})
	s2, err := store.Take(ctx, dir, "turn 2")
	require.NoError(t, err)
	assert.Equal(t, 2, s2.FilesChanged)
	after2 := tree(t, dir)

	require.NoError(t, os.Remove(filepath.Join(dir, "b/c.txt")))
	write(t, dir, map[string]string{"d.txt": "three"})
	s3, err := store.Take(ctx, dir, "turn 3")
	require.NoError(t, err)
	assert.Equal(t, 2, s3.FilesChanged)

	same, err := store.Take(ctx, dir, "turn 4")
	require.NoError(t, err)
	assert.Equal(t, s3.Tree, same.Tree, "an unchanged directory is the same tree")
	assert.Zero(t, same.FilesChanged)

	t.Run("rewinding in place", func(t *testing.T) {
		require.NoError(t, store.Restore(ctx, dir, s2.Commit))
		assert.Equal(t, after2, tree(t, dir))
		next, err := store.Take(ctx, dir, "after the rewind")
		require.NoError(t, err)
		assert.Equal(t, s2.Tree, next.Tree)
	})
	t.Run("copying into a new directory", func(t *testing.T) {
		other := filepath.Join(root, "fork")
		require.NoError(t, store.Restore(ctx, other, s1.Commit))
		want := map[string]string{".gitignore": after1[".gitignore"], "a.txt": after1["a.txt"]}
		assert.Equal(t, want, tree(t, other), "the copy holds the snapshot's files, not the ignored ones")
	})
	t.Run("an unknown snapshot is refused", func(t *testing.T) {
		assert.Error(t, store.Restore(ctx, dir, strings.Repeat("ab", 20)))
		assert.Error(t, store.Restore(ctx, dir, "HEAD"))
	})
}

// The writer half of TestAKilledWriterLeavesAWholeSnapshot: it snapshots
// its directory, changing files between snapshots, until it is killed.
func TestMain(m *testing.M) {
	if dir := os.Getenv("CHECKPOINT_WRITER_DIR"); dir != "" {
		store := checkpoint.Store{Dir: os.Getenv("CHECKPOINT_WRITER_STORE")}
		for i := 0; ; i++ {
			for f := 0; f < 200; f++ {
				if f%10 == i%10 {
					name := filepath.Join(dir, fmt.Sprintf("d%02d", f%20), fmt.Sprintf("f%03d.txt", f))
					_ = os.MkdirAll(filepath.Dir(name), 0o755)
					_ = os.WriteFile(name, []byte(strings.Repeat(fmt.Sprintf("%d-%d\n", i, f), 500)), 0o644)
				}
			}
			if _, err := store.Take(context.Background(), dir, fmt.Sprintf("round %d", i)); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(3)
			}
			// Retention drops the older snapshots as it goes: a kill may
			// land in a prune too.
			if _, err := store.Prune(context.Background(), checkpoint.Retention{Keep: 3}, time.Now()); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(3)
			}
			transcript := []byte(strings.Repeat(fmt.Sprintf("{\"round\":%d}\n", i), 20000))
			if err := store.SaveConversation(context.Background(), "engine-session", transcript); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(3)
			}
			fmt.Println(i)
		}
	}
	os.Exit(m.Run())
}

func TestAKilledWriterLeavesAWholeSnapshot(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	dir, store := filepath.Join(root, "work"), checkpoint.Store{Dir: filepath.Join(root, "store.git")}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for round := 0; round < 6; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "CHECKPOINT_WRITER_DIR="+dir, "CHECKPOINT_WRITER_STORE="+store.Dir)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		// Kill it while it writes: after it reported some snapshots, at a
		// point that differs from round to round.
		buf := make([]byte, 64)
		for n := 0; n < 1+round%3; {
			k, err := out.Read(buf)
			require.NoError(t, err, "the writer stopped by itself")
			n += strings.Count(string(buf[:k]), "\n")
		}
		time.Sleep(time.Duration(round) * 7 * time.Millisecond)
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()

		head, err := store.Head(ctx)
		require.NoError(t, err)
		require.NotEmpty(t, head, "round %d: no snapshot survived", round)
		fsck := exec.Command("git", "--git-dir", store.Dir, "fsck", "--full", "--no-dangling")
		fsck.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null")
		res, err := fsck.CombinedOutput()
		require.NoError(t, err, "round %d: the store is broken: %s", round, res)

		// The snapshot the ref names restores whole, and the next one works.
		copyDir := filepath.Join(root, fmt.Sprintf("copy%d", round))
		require.NoError(t, store.Restore(ctx, copyDir, head))
		files, err := store.Files(ctx, head)
		require.NoError(t, err)
		got := tree(t, copyDir)
		names := make([]string, 0, len(got))
		for n := range got {
			names = append(names, n)
		}
		sort.Strings(names)
		assert.Equal(t, files, names)
		// Every earlier snapshot kept restores too, and the conversation
		// kept is a whole one.
		kept, err := store.Snapshots(ctx)
		require.NoError(t, err)
		require.NotEmpty(t, kept)
		assert.LessOrEqual(t, len(kept), 4, "round %d: three kept, and one a kill may have left before its prune", round)
		for _, k := range kept {
			commit := k.Commit
			require.NoError(t, store.Restore(ctx, filepath.Join(root, "each"), commit), "round %d: snapshot %s", round, commit)
		}
		if conv, err := store.Conversation(ctx, "engine-session"); assert.NoError(t, err) && conv != nil {
			first, _, _ := strings.Cut(string(conv), "\n")
			assert.Equal(t, strings.Repeat(first+"\n", 20000), string(conv), "round %d: a torn conversation", round)
		}
		_, err = store.Take(ctx, dir, "after the kill")
		require.NoError(t, err, "round %d: a snapshot after the kill failed", round)
	}
}

// TestAConversationIsKeptAndCopiedToAForksStore keeps an engine's
// transcript in a store, replaces it, and copies it into another.
func TestAConversationIsKeptAndCopiedToAForksStore(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	parent, fork := checkpoint.Store{Dir: filepath.Join(root, "parent.git")}, checkpoint.Store{Dir: filepath.Join(root, "fork.git")}
	id := "0d6f3c1e-2a4b-4c8d-9e0f-1a2b3c4d5e6f"
	got, err := parent.Conversation(ctx, id)
	require.NoError(t, err)
	assert.Nil(t, got, "no store yet")

	require.NoError(t, parent.SaveConversation(ctx, id, []byte("{\"turn\":1}\n")))
	require.NoError(t, parent.SaveConversation(ctx, id, []byte("{\"turn\":1}\n{\"turn\":2}\n")))
	got, err = parent.Conversation(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "{\"turn\":1}\n{\"turn\":2}\n", string(got), "the newest transcript")
	got, err = parent.Conversation(ctx, "another")
	require.NoError(t, err)
	assert.Nil(t, got)

	require.NoError(t, checkpoint.CopyConversation(ctx, parent, fork, id))
	got, err = fork.Conversation(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "{\"turn\":1}\n{\"turn\":2}\n", string(got))
	require.NoError(t, checkpoint.CopyConversation(ctx, parent, fork, "another"), "nothing to copy")

	assert.Error(t, parent.SaveConversation(ctx, "../HEAD", []byte("x")), "only a plain id names a ref")
	_, err = parent.Conversation(ctx, "a b")
	assert.Error(t, err)
}

// gitIn runs git in dir with no user or system config.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@localhost"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// TestARepositoryInsideTheWorkingDirectoryIsSnapshotWithItsFiles snapshots
// a working directory holding a git repository of its own (and one in
// that): the snapshot holds their files, not a link to commits it lacks,
// and a restore leaves the nested repositories working.
func TestARepositoryInsideTheWorkingDirectoryIsSnapshotWithItsFiles(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	dir, store := filepath.Join(root, "work"), checkpoint.Store{Dir: filepath.Join(root, "store.git")}
	write(t, dir, map[string]string{"README.md": "outer\n", "lib/inner.go": "package lib\n", "lib/deep/x.txt": "deep\n"})
	gitIn(t, filepath.Join(dir, "lib", "deep"), "init", "-q")
	gitIn(t, filepath.Join(dir, "lib", "deep"), "add", ".")
	gitIn(t, filepath.Join(dir, "lib", "deep"), "commit", "-qm", "deep")
	gitIn(t, filepath.Join(dir, "lib"), "init", "-q")
	gitIn(t, filepath.Join(dir, "lib"), "add", "inner.go")
	gitIn(t, filepath.Join(dir, "lib"), "commit", "-qm", "inner")
	write(t, dir, map[string]string{"lib/untracked.txt": "not committed\n", "lib/.gitignore": "*.log\n", "lib/build.log": "ignored\n"})
	first := map[string]string{"README.md": "outer\n", "lib/inner.go": "package lib\n", "lib/deep/x.txt": "deep\n",
		"lib/untracked.txt": "not committed\n", "lib/.gitignore": "*.log\n"}

	one, err := store.Take(ctx, dir, "turn 1")
	require.NoError(t, err)
	files, err := store.Files(ctx, one.Commit)
	require.NoError(t, err)
	sort.Strings(files)
	assert.Equal(t, []string{"README.md", "lib/.gitignore", "lib/deep/x.txt", "lib/inner.go", "lib/untracked.txt"}, files)

	write(t, dir, map[string]string{"lib/inner.go": "package lib // changed\n", "lib/deep/x.txt": "deeper\n"})
	two, err := store.Take(ctx, dir, "turn 2")
	require.NoError(t, err)
	assert.Equal(t, 2, two.FilesChanged)

	fork := filepath.Join(root, "fork")
	require.NoError(t, store.Restore(ctx, fork, one.Commit))
	assert.Equal(t, first, tree(t, fork), "a copy holds the nested repositories' files")

	require.NoError(t, store.Restore(ctx, dir, one.Commit))
	got := tree(t, dir)
	delete(got, "lib/build.log")
	assert.Equal(t, first, got, "a rewind restores the nested repositories' files")
	assert.Contains(t, gitIn(t, filepath.Join(dir, "lib"), "status", "--porcelain"), "untracked.txt", "the nested repository still works")
	three, err := store.Take(ctx, dir, "turn 3")
	require.NoError(t, err)
	assert.Equal(t, one.Tree, three.Tree)
}
