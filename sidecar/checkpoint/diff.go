package checkpoint

import (
	"context"
	"fmt"
	"strings"
)

// File statuses of a Diff.
const (
	Added   = "added"
	Removed = "removed"
	Changed = "changed"
)

// FileDiff is how one file differs between two snapshots.
type FileDiff struct {
	// Path is the file's path in the working directory.
	Path string
	// Status is Added, Removed or Changed.
	Status string
	// OldBytes and NewBytes are its sizes before and after (0 when absent).
	OldBytes, NewBytes int64
	// Binary is true for a file git takes for binary: it has no Patch.
	Binary bool
	// Patch is the unified diff of a text file, "" when Omitted says why.
	Patch string
	// Omitted says why a text file has no Patch: the diff's bound was
	// reached.
	Omitted string
}

// Diff compares two snapshots: the files added, removed and changed, in
// path order, with the unified diffs of text files while their total
// stays within maxPatchBytes.
func (s Store) Diff(ctx context.Context, from, to string, maxPatchBytes int) ([]FileDiff, error) {
	for _, c := range []string{from, to} {
		if !validID(c) {
			return nil, fmt.Errorf("checkpoint: %q is not a commit id", c)
		}
	}
	out, err := s.git(ctx, "", "", nil, "diff-tree", "-r", "-z", "--no-renames", "--name-status", from, to)
	if err != nil {
		return nil, err
	}
	before, err := s.sizes(ctx, from)
	if err != nil {
		return nil, err
	}
	after, err := s.sizes(ctx, to)
	if err != nil {
		return nil, err
	}
	var files []FileDiff
	fields := strings.Split(out, "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		f := FileDiff{Path: fields[i+1], Status: Changed, OldBytes: before[fields[i+1]], NewBytes: after[fields[i+1]]}
		switch fields[i] {
		case "A":
			f.Status = Added
		case "D":
			f.Status = Removed
		}
		files = append(files, f)
	}
	budget := maxPatchBytes
	for i := range files {
		if err := s.patch(ctx, from, to, &files[i], &budget); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// patch fills in f's unified diff if it is text and fits in what is left
// of the budget, which it then takes from.
func (s Store) patch(ctx context.Context, from, to string, f *FileDiff, budget *int) error {
	if int(max(f.OldBytes, f.NewBytes)) > *budget {
		f.Omitted = "the diff's size bound was reached"
		return nil
	}
	out, err := s.git(ctx, "", "", nil, "diff", "--no-color", "--no-renames", "--no-ext-diff", "--no-textconv",
		from, to, "--", ":(literal)"+f.Path)
	if err != nil {
		return err
	}
	if strings.Contains(out, "\nBinary files ") || strings.HasPrefix(out, "Binary files ") {
		f.Binary = true
		return nil
	}
	// The hunks, without git's header lines before the first one.
	if i := strings.Index(out, "\n@@"); i >= 0 {
		out = out[i+1:] + "\n"
	} else {
		out = ""
	}
	if len(out) > *budget {
		f.Omitted = "the diff's size bound was reached"
		return nil
	}
	f.Patch = out
	*budget -= len(out)
	return nil
}
