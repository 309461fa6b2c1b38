package domain

import (
	"encoding/json"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
)

// chars counts characters the way people do (runes), which is what the
// length limits of the model mean.
func chars(s string) int { return utf8.RuneCountInString(s) }

// requireText trims s and checks it has min..max characters (max 0: no
// upper bound).
func requireText(field, s string, min, max int) (string, error) {
	t := strings.TrimSpace(s)
	n := chars(t)
	if n < min {
		if min == 1 {
			return "", invalid(field, "must not be empty")
		}
		return "", invalid(field, "must be at least %d characters", min)
	}
	if max > 0 && n > max {
		return "", invalid(field, "must be at most %d characters, got %d", max, n)
	}
	return t, nil
}

// optionalText is requireText for a field that may be empty.
func optionalText(field, s string, max int) (string, error) {
	return requireText(field, s, 0, max)
}

// requireID rejects the nil UUID, which the model never uses as an id.
func requireID(field string, id uuid.UUID) error {
	if id == uuid.Nil {
		return invalid(field, "must be set")
	}
	return nil
}

// requireJSON checks s is one valid JSON value.
func requireJSON(field, s string) error {
	if strings.TrimSpace(s) == "" || !json.Valid([]byte(s)) {
		return invalid(field, "must be valid JSON")
	}
	return nil
}

// requireAbsolutePath checks a working directory: non-empty, absolute,
// no NUL byte. It is cleaned so equal paths compare equal.
func requireAbsolutePath(field, p string) (string, error) {
	p = strings.TrimSpace(p)
	if p == "" {
		return "", invalid(field, "must not be empty")
	}
	if strings.ContainsRune(p, 0) {
		return "", invalid(field, "must not contain NUL")
	}
	if !path.IsAbs(p) && !isWindowsAbs(p) {
		return "", invalid(field, "must be an absolute path, got %q", p)
	}
	if path.IsAbs(p) {
		p = path.Clean(p)
	}
	return p, nil
}

// isWindowsAbs accepts C:\dir and C:/dir: a sidecar may run on Windows.
func isWindowsAbs(p string) bool {
	return len(p) >= 3 && ((p[0] >= 'a' && p[0] <= 'z') || (p[0] >= 'A' && p[0] <= 'Z')) &&
		p[1] == ':' && (p[2] == '\\' || p[2] == '/')
}

// cloneIDs copies a slice so callers cannot alias aggregate state.
func cloneIDs(ids []uuid.UUID) []uuid.UUID {
	if ids == nil {
		return nil
	}
	return append([]uuid.UUID(nil), ids...)
}

// clonePtr copies the value behind p.
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// firstLine returns the first non-blank line of text, cut to max
// characters with an ellipsis.
func firstLine(text string, max int) string {
	line := strings.TrimSpace(text)
	line, _, _ = strings.Cut(line, "\n")
	r := []rune(strings.TrimSpace(line))
	if len(r) > max {
		r = append(r[:max-1], '…')
	}
	return string(r)
}
