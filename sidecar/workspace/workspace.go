// Package workspace confines sessions to their owners' part of the
// workspace: every session works in a directory under <root>/<owner id>/,
// symlinks followed, so no owner can point an agent, or the checks it
// runs, at another owner's files or anywhere else on the host.
package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"
)

// ErrOutside is matched by every error of a directory outside the owner's
// part of the workspace.
var ErrOutside = errors.New("outside the owner's workspace")

// Root is the workspace root, an absolute path.
type Root string

// New returns the root at dir, made absolute and created if missing.
func New(dir string) (Root, error) {
	if dir == "" {
		return "", errors.New("workspace: no root directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	return Root(abs), nil
}

// OwnerDir returns <root>/<owner>, created if missing.
func (r Root) OwnerDir(owner uuid.UUID) (string, error) {
	dir := filepath.Join(string(r), owner.String())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	return dir, nil
}

// Resolve returns the directory a session of owner works in: requested
// when it is inside <root>/<owner>/ (a relative path is taken from there),
// else <root>/<owner>/<fallback> when requested is empty. The path is
// returned cleaned; the directory itself need not exist yet.
func (r Root) Resolve(owner uuid.UUID, requested, fallback string) (string, error) {
	home, err := r.OwnerDir(owner)
	if err != nil {
		return "", err
	}
	p := requested
	if p == "" {
		p = fallback
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(home, p)
	}
	p = filepath.Clean(p)
	if err := r.Check(owner, p); err != nil {
		return "", err
	}
	return p, nil
}

// Check reports whether dir, symlinks followed as far as it exists, lies
// inside <root>/<owner>/ (the owner's directory itself included).
func (r Root) Check(owner uuid.UUID, dir string) error {
	home, err := filepath.EvalSymlinks(filepath.Join(string(r), owner.String()))
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	real, err := resolveExisting(filepath.Clean(dir))
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	rel, err := filepath.Rel(home, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("%s is %w %s", dir, ErrOutside, filepath.Join(string(r), owner.String()))
	}
	return nil
}

// resolveExisting follows the symlinks of the longest existing prefix of
// p and appends the rest.
func resolveExisting(p string) (string, error) {
	rest := ""
	for {
		real, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(p, rest), nil
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}
