package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Kept is a snapshot the store keeps.
type Kept struct {
	// Commit is the snapshot's commit.
	Commit string
	// TakenAt is when it was taken (to the second).
	TakenAt time.Time
	// seq is its place in the order the snapshots were taken.
	seq int
}

// Retention is how many snapshots a store keeps; the newest is always
// kept. Zero values keep everything.
type Retention struct {
	// Keep is how many of the newest snapshots are kept; 0 keeps any
	// number.
	Keep int
	// MaxAge drops the snapshots taken longer ago; 0 keeps any age.
	MaxAge time.Duration
}

// snapshotRef names the ref of the seq-th snapshot.
func snapshotRef(seq int) string { return fmt.Sprintf("%s%010d", snapshotRefs, seq) }

// Snapshots returns the snapshots the store keeps, oldest first.
func (s Store) Snapshots(ctx context.Context) ([]Kept, error) {
	if _, err := os.Stat(filepath.Join(s.Dir, "HEAD")); err != nil {
		return nil, nil
	}
	if err := s.migrate(ctx); err != nil {
		return nil, err
	}
	out, err := s.git(ctx, "", "", nil, "for-each-ref", "--sort=refname",
		"--format=%(refname) %(objectname) %(committerdate:unix)", snapshotRefs)
	if err != nil || out == "" {
		return nil, err
	}
	var kept []Kept
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		seq, err1 := strconv.Atoi(strings.TrimPrefix(f[0], snapshotRefs))
		unix, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		kept = append(kept, Kept{Commit: f[1], TakenAt: time.Unix(unix, 0), seq: seq})
	}
	return kept, nil
}

// migrate gives each snapshot of a store written as one chain of commits
// a ref of its own, oldest first, and then drops the chain's ref. Each
// step can be done again: a writer killed midway migrates on its next
// start. (A chain's snapshot keeps its ancestors' files until it is
// dropped too.)
func (s Store) migrate(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(s.Dir, "HEAD")); err != nil {
		return nil
	}
	head, err := s.git(ctx, "", "", nil, "for-each-ref", "--format=%(objectname)", legacyRef)
	if err != nil || head == "" {
		return err
	}
	chain, err := s.git(ctx, "", "", nil, "rev-list", "--reverse", head)
	if err != nil {
		return err
	}
	var updates strings.Builder
	for i, commit := range strings.Fields(chain) {
		fmt.Fprintf(&updates, "update %s %s\n", snapshotRef(i+1), commit)
	}
	if _, err := s.git(ctx, "", "", []byte(updates.String()), "update-ref", "--stdin"); err != nil {
		return err
	}
	_, err = s.git(ctx, "", "", nil, "update-ref", "-d", legacyRef, head)
	return err
}

// Prune drops the snapshots policy does not keep, as of now, and the
// files no kept snapshot holds any more; it returns the commits dropped,
// oldest first. The newest snapshot is always kept.
func (s Store) Prune(ctx context.Context, policy Retention, now time.Time) ([]string, error) {
	kept, err := s.Snapshots(ctx)
	if err != nil || len(kept) < 2 {
		return nil, err
	}
	var drop strings.Builder
	var dropped []string
	for i, k := range kept[:len(kept)-1] {
		tooMany := policy.Keep > 0 && len(kept)-i > policy.Keep
		tooOld := policy.MaxAge > 0 && now.Sub(k.TakenAt) > policy.MaxAge
		if tooMany || tooOld {
			fmt.Fprintf(&drop, "delete %s %s\n", snapshotRef(k.seq), k.Commit)
			dropped = append(dropped, k.Commit)
		}
	}
	if len(dropped) == 0 {
		return nil, nil
	}
	if _, err := s.git(ctx, "", "", []byte(drop.String()), "update-ref", "--stdin"); err != nil {
		return nil, err
	}
	// Only this process writes the store, so nothing is being written
	// that no ref reaches yet.
	if _, err := s.git(ctx, "", "", nil, "prune", "--expire=now"); err != nil {
		return dropped, err
	}
	return dropped, nil
}

// DiskBytes returns the size of the store's files on disk.
func (s Store) DiskBytes() (int64, error) {
	var total int64
	err := filepath.WalkDir(s.Dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walked (a lock, a pruned object)
			}
			return err
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("checkpoint: the store's size: %w", err)
	}
	return total, nil
}
