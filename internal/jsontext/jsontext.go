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
	var stack []frame
	path := func(leaf string) string {
		var b strings.Builder
		for _, f := range stack {
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
	valueDone := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].object {
				stack[n-1].wantKey = true
			} else {
				stack[n-1].index++
			}
		}
	}
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			if len(stack) > 0 {
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
			switch v {
			case '{':
				stack = append(stack, frame{object: true, wantKey: true})
			case '[':
				stack = append(stack, frame{})
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
		case string:
			reason := ReasonNUL
			if strings.IndexByte(v, 0) < 0 {
				reason = ""
				if !utf8.Valid(raw) {
					reason = ReasonNotUTF8
				}
			}
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
				if reason != "" {
					return &Problem{Path: path(Clean(v)), Reason: "a key " + reason}, nil
				}
				stack[n-1].key, stack[n-1].wantKey = v, false
				continue
			}
			if reason != "" {
				return &Problem{Path: path(""), Reason: reason}, nil
			}
			valueDone()
		default:
			valueDone()
		}
	}
}
