// Package checkpoint snapshots a working directory into a private git
// object store and restores it from there. The store is a bare repository
// outside the working directory, so the agent's own repository (if any) is
// never touched; a private index keeps each snapshot cheap (only files
// whose stat changed are read again) and git's content addressing
// deduplicates them across snapshots. What .gitignore ignores is left out.
//
// Each snapshot is a commit of its own, without a parent, named by a ref
// of its own (refs/snapshots/<sequence>): dropping the ref of an old
// snapshot (Prune) leaves its files unreachable, and git's prune removes
// those no other snapshot holds.
//
// A snapshot is written as git writes anything: its objects first, each
// to a temporary file renamed into place, then its ref created with an
// atomic compare-and-swap. A process killed at any point leaves the store
// at its previous snapshot or at the new one, never at a broken one.
package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// snapshotRefs holds one ref per snapshot, refs/snapshots/<sequence>,
// the sequence zero-padded so that the names sort as the snapshots were
// taken.
const snapshotRefs = "refs/snapshots/"

// legacyRef held the newest snapshot of a store written when every
// snapshot was its predecessor's child; such a store is given a ref per
// snapshot on its next Take.
const legacyRef = "refs/heads/checkpoints"

// emptyTree is git's id of the empty tree.
const emptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

// indexFile is the store's private index of the working directory.
const indexFile = "agentbus.index"

// Snapshot is one snapshot of a working directory.
type Snapshot struct {
	// Commit is the commit that records it.
	Commit string
	// Tree is the working directory's tree.
	Tree string
	// FilesChanged counts the files added, changed or removed since the
	// previous snapshot.
	FilesChanged int
	// Bytes is the size of the snapshot's files.
	Bytes int64
	// AddedBytes is the size of the files added or changed since the
	// previous snapshot: about what the snapshot added to the store
	// before compression.
	AddedBytes int64
}

// Store is a private object store of snapshots.
type Store struct {
	// Dir is the bare repository; created on first use.
	Dir string
}

// git runs git on the store with dir as its work tree and index as its
// index; no user or system config applies.
func (s Store) git(ctx context.Context, dir, index string, stdin []byte, args ...string) (string, error) {
	base := []string{"-c", "safe.directory=*", "-c", "core.autocrlf=false", "-c", "core.fsyncObjectFiles=true",
		"-c", "user.name=agentbus", "-c", "user.email=agentbus@localhost", "-c", "gc.auto=0"}
	cmd := exec.CommandContext(ctx, "git", append(base, args...)...)
	env := []string{"GIT_DIR=" + s.Dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"HOME=" + s.Dir, "PATH=" + os.Getenv("PATH"), "LANG=C"}
	if dir != "" {
		env = append(env, "GIT_WORK_TREE="+dir)
		cmd.Dir = dir
	}
	if index != "" {
		env = append(env, "GIT_INDEX_FILE="+index)
	}
	cmd.Env = env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("checkpoint: git %s: %w: %s", args[0], err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// init creates the bare repository unless it exists.
func (s Store) init(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(s.Dir, "HEAD")); err == nil {
		return nil
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	_, err := s.git(ctx, "", "", nil, "init", "--quiet", "--bare", s.Dir)
	return err
}

// Head returns the newest snapshot's commit, "" when there is none.
func (s Store) Head(ctx context.Context) (string, error) {
	kept, err := s.Snapshots(ctx)
	if err != nil || len(kept) == 0 {
		return "", err
	}
	return kept[len(kept)-1].Commit, nil
}

// Take snapshots dir with message as the commit's message.
func (s Store) Take(ctx context.Context, dir, message string) (Snapshot, error) {
	if err := s.init(ctx); err != nil {
		return Snapshot{}, err
	}
	index := filepath.Join(s.Dir, indexFile)
	// A writer killed mid-snapshot leaves its lock behind; this process is
	// the store's only writer.
	_ = os.Remove(index + ".lock")
	if err := s.addAll(ctx, dir, index); err != nil {
		return Snapshot{}, err
	}
	tree, err := s.git(ctx, dir, index, nil, "write-tree")
	if err != nil {
		return Snapshot{}, err
	}
	kept, err := s.Snapshots(ctx)
	if err != nil {
		return Snapshot{}, err
	}
	seq, prevTree := 1, emptyTree
	if len(kept) > 0 {
		last := kept[len(kept)-1]
		seq = last.seq + 1
		if prevTree, err = s.git(ctx, "", "", nil, "rev-parse", last.Commit+"^{tree}"); err != nil {
			return Snapshot{}, err
		}
	}
	// The sequence in the message keeps two snapshots of one tree, taken
	// in the same second, two commits.
	commit, err := s.git(ctx, "", "", nil, "commit-tree", tree, "-m", message, "-m", fmt.Sprintf("snapshot %d", seq))
	if err != nil {
		return Snapshot{}, err
	}
	// Created only if no ref has the name yet: the compare-and-swap that
	// makes the snapshot whole.
	if _, err := s.git(ctx, "", "", nil, "update-ref", "-m", message, snapshotRef(seq), commit, strings.Repeat("0", 40)); err != nil {
		return Snapshot{}, err
	}
	snap := Snapshot{Commit: commit, Tree: tree}
	err = s.measure(ctx, prevTree, &snap)
	return snap, err
}

// measure fills in the files snap changed since prevTree and the sizes.
func (s Store) measure(ctx context.Context, prevTree string, snap *Snapshot) error {
	changed, err := s.git(ctx, "", "", nil, "diff-tree", "-r", "-z", "--name-only", "--no-renames", prevTree, snap.Tree)
	if err != nil {
		return err
	}
	sizes, err := s.sizes(ctx, snap.Tree)
	if err != nil {
		return err
	}
	for _, path := range strings.Split(changed, "\x00") {
		if path != "" {
			snap.FilesChanged++
			snap.AddedBytes += sizes[path]
		}
	}
	for _, n := range sizes {
		snap.Bytes += n
	}
	return nil
}

// sizes returns the size of each file of tree, by path.
func (s Store) sizes(ctx context.Context, tree string) (map[string]int64, error) {
	out, err := s.git(ctx, "", "", nil, "ls-tree", "-r", "-l", "-z", tree)
	if err != nil {
		return nil, err
	}
	sizes := map[string]int64{}
	for _, entry := range strings.Split(out, "\x00") {
		meta, path, ok := strings.Cut(entry, "\t")
		fields := strings.Fields(meta)
		if !ok || len(fields) != 4 {
			continue
		}
		n, _ := strconv.ParseInt(fields[3], 10, 64) // "-" for a link to a commit: 0
		sizes[path] = n
	}
	return sizes, nil
}

// Restore makes dir hold exactly the snapshot commit: its files written,
// files of dir that the snapshot lacks removed (ignored files stay). dir
// may be empty or missing (a new copy).
func (s Store) Restore(ctx context.Context, dir, commit string) error {
	if !validID(commit) {
		return fmt.Errorf("checkpoint: %q is not a commit id", commit)
	}
	if _, err := s.git(ctx, "", "", nil, "cat-file", "-e", commit+"^{commit}"); err != nil {
		return fmt.Errorf("checkpoint: no snapshot %s: %w", commit, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	// A private index for this copy: it first records what dir holds now,
	// so that reading the snapshot over it removes what the snapshot lacks.
	tmp, err := os.CreateTemp(s.Dir, "restore-*.index")
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	index := tmp.Name()
	tmp.Close()
	os.Remove(index)
	defer os.Remove(index)
	defer os.Remove(index + ".lock")
	if err := s.addAll(ctx, dir, index); err != nil {
		return err
	}
	if _, err := s.git(ctx, dir, index, nil, "read-tree", "-u", "--reset", commit); err != nil {
		return err
	}
	// The store's own index no longer describes dir: the next snapshot
	// reads every file again.
	if err := os.Remove(filepath.Join(s.Dir, indexFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// conversationRef is the ref that holds an engine conversation's
// transcript, by the engine's session id.
func conversationRef(engineSessionID string) string { return "refs/conversations/" + engineSessionID }

// SaveConversation keeps the transcript of the engine's conversation
// engineSessionID, replacing the one kept before: a fork, or a rewind
// after the sidecar's home is gone, resumes it from here. The blob is
// written before the ref moves to it.
func (s Store) SaveConversation(ctx context.Context, engineSessionID string, transcript []byte) error {
	if !validName(engineSessionID) {
		return fmt.Errorf("checkpoint: %q is not an engine session id", engineSessionID)
	}
	if err := s.init(ctx); err != nil {
		return err
	}
	blob, err := s.git(ctx, "", "", transcript, "hash-object", "-w", "--stdin")
	if err != nil {
		return err
	}
	_, err = s.git(ctx, "", "", nil, "update-ref", conversationRef(engineSessionID), blob)
	return err
}

// Conversation returns the transcript SaveConversation kept for
// engineSessionID, nil when there is none.
func (s Store) Conversation(ctx context.Context, engineSessionID string) ([]byte, error) {
	if !validName(engineSessionID) {
		return nil, fmt.Errorf("checkpoint: %q is not an engine session id", engineSessionID)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "HEAD")); err != nil {
		return nil, nil
	}
	ref := conversationRef(engineSessionID)
	if _, err := s.git(ctx, "", "", nil, "rev-parse", "--verify", "--quiet", ref); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return nil, nil
		}
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "git", "cat-file", "blob", ref)
	cmd.Env = []string{"GIT_DIR=" + s.Dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=" + s.Dir,
		"PATH=" + os.Getenv("PATH"), "LANG=C"}
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("checkpoint: read the conversation %s: %w", engineSessionID, err)
	}
	return out, nil
}

// CopyConversation copies the transcript of engineSessionID from one
// store into another (a fork's), if from keeps one.
func CopyConversation(ctx context.Context, from, to Store, engineSessionID string) error {
	transcript, err := from.Conversation(ctx, engineSessionID)
	if err != nil || transcript == nil {
		return err
	}
	return to.SaveConversation(ctx, engineSessionID, transcript)
}

// gitlinkMode is the index mode of a repository nested in the work tree.
const gitlinkMode = "160000"

// addAll records dir's files in index. Git records a repository nested in
// dir (a directory holding .git) as a link to one of its commits, which
// the store lacks: its files are recorded instead, read from its own work
// tree (its .gitignore applies, its .git is left out), nested ones in it
// alike.
func (s Store) addAll(ctx context.Context, dir, index string) error {
	if _, err := s.git(ctx, dir, index, nil, "add", "--all", "."); err != nil {
		return err
	}
	out, err := s.git(ctx, dir, index, nil, "ls-files", "--stage", "-z")
	if err != nil {
		return err
	}
	for _, entry := range strings.Split(out, "\x00") {
		meta, path, ok := strings.Cut(entry, "\t")
		if !ok || !strings.HasPrefix(meta, gitlinkMode+" ") {
			continue
		}
		tree, err := s.nestedTree(ctx, filepath.Join(dir, path))
		if err != nil {
			return err
		}
		if _, err := s.git(ctx, dir, index, nil, "update-index", "--force-remove", "--", path); err != nil {
			return err
		}
		if _, err := s.git(ctx, dir, index, nil, "read-tree", "--prefix="+path+"/", tree); err != nil {
			return err
		}
	}
	return nil
}

// nestedTree writes the tree of the files of the repository nested at
// dir into the store, through an index of its own.
func (s Store) nestedTree(ctx context.Context, dir string) (string, error) {
	tmp, err := os.CreateTemp(s.Dir, "nested-*.index")
	if err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	index := tmp.Name()
	tmp.Close()
	os.Remove(index)
	defer os.Remove(index)
	defer os.Remove(index + ".lock")
	if err := s.addAll(ctx, dir, index); err != nil {
		return "", err
	}
	return s.git(ctx, dir, index, nil, "write-tree")
}

// Files returns the paths of the files of the snapshot commit.
func (s Store) Files(ctx context.Context, commit string) ([]string, error) {
	out, err := s.git(ctx, "", "", nil, "ls-tree", "-r", "--name-only", commit)
	if err != nil || out == "" {
		return nil, err
	}
	return strings.Split(out, "\n"), nil
}

// validName says whether id may name a ref: letters, digits, '-' and '_'.
func validName(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func validID(id string) bool {
	if len(id) != 40 && len(id) != 64 {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
