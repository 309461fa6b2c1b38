// Package jsontext finds text that agentbus must refuse at its edges: a
// NUL character, which Postgres stores in neither text nor jsonb, and
// bytes that are not UTF-8, which encoding/json would silently replace.
// Checking once where input enters (the API's request bodies, the ACL's
// raw events) turns what would be a database error deep in a worker, and
// a retried, dead-lettered command, into an answer naming the field.
package jsontext

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Problem is the first unacceptable text found in a JSON document.
type Problem struct {
	// Path names the string: object keys joined by dots, array indexes in
	// brackets (tags[1], metadata.note); empty for a top-level string.
	Path string
	// Reason says what is wrong, for people.
	Reason string
}

// Error returns the reason, prefixed with the path when there is one.
func (p *Problem) Error() string {
	if p.Path == "" {
		return p.Reason
	}
	return p.Path + ": " + p.Reason
}

// Reasons a string is refused.
const (
	ReasonNUL     = "must not contain the NUL character (\\u0000)"
	ReasonNotUTF8 = "must be valid UTF-8"
)

// CheckString returns the reason s is refused, or "".
func CheckString(s string) string {
	if strings.IndexByte(s, 0) >= 0 {
		return ReasonNUL
	}
	if !utf8.ValidString(s) {
		return ReasonNotUTF8
	}
	return ""
}

// Clean returns s without NUL characters and with invalid UTF-8 replaced
// by U+FFFD, for text that must be stored although it came in broken (an
// error message that quotes its input).
func Clean(s string) string {
	if CheckString(s) == "" {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
}

// frame is one open object or array while walking a document.
type frame struct {
	object bool
	// key is the member being read (objects); wantKey is true between
	// members, when the next string is a key.
	key     string
	wantKey bool
	index   int
}

// Check walks the JSON document data and returns the first string (value
// or object key) that holds a NUL character or bytes that are not UTF-8,
// or nil when every string is acceptable. The error is for data that is
// not JSON; the caller's decoder reports that in its own words.
func Check(data []byte) (*Problem, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var w walker
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			if len(w.stack) > 0 {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		// The token's own bytes (with any separator before it, which is
		// ASCII): the decoded string has invalid UTF-8 replaced already.
		raw := data[start:dec.InputOffset()]
		switch v := tok.(type) {
		case json.Delim:
			w.delim(v)
		case string:
			if p := w.str(v, raw); p != nil {
				return p, nil
			}
		default:
			w.valueDone()
		}
	}
}

// walker follows where Check is in the document.
type walker struct {
	stack []frame
}

// path is the path of the current position, with leaf appended.
func (w *walker) path(leaf string) string {
	var b strings.Builder
	for _, f := range w.stack {
		if f.object {
			if f.wantKey {
				continue // between members: no key yet
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		} else {
			b.WriteString("[" + strconv.Itoa(f.index) + "]")
		}
	}
	if leaf != "" {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(leaf)
	}
	return b.String()
}

// valueDone moves past a value: to the next key or index.
func (w *walker) valueDone() {
	if n := len(w.stack); n > 0 {
		if w.stack[n-1].object {
			w.stack[n-1].wantKey = true
		} else {
			w.stack[n-1].index++
		}
	}
}

// delim opens or closes an object or an array.
func (w *walker) delim(v json.Delim) {
	switch v {
	case '{':
		w.stack = append(w.stack, frame{object: true, wantKey: true})
	case '[':
		w.stack = append(w.stack, frame{})
	default:
		w.stack = w.stack[:len(w.stack)-1]
		w.valueDone()
	}
}

// str takes a string, a key or a value, and returns its problem if it has
// one.
func (w *walker) str(v string, raw []byte) *Problem {
	reason := stringReason(v, raw)
	if n := len(w.stack); n > 0 && w.stack[n-1].object && w.stack[n-1].wantKey {
		if reason != "" {
			return &Problem{Path: w.path(Clean(v)), Reason: "a key " + reason}
		}
		w.stack[n-1].key, w.stack[n-1].wantKey = v, false
		return nil
	}
	if reason != "" {
		return &Problem{Path: w.path(""), Reason: reason}
	}
	w.valueDone()
	return nil
}

// stringReason is what is wrong with the string v, read from raw: a NUL,
// bytes that are not UTF-8, or nothing.
func stringReason(v string, raw []byte) string {
	if strings.IndexByte(v, 0) >= 0 {
		return ReasonNUL
	}
	if !utf8.Valid(raw) {
		return ReasonNotUTF8
	}
	return ""
}
