package jsontext_test

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/jsontext"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		doc    string
		path   string
		reason string
	}{
		{"clean", `{"objective":"Say hello","tags":["a","b"],"n":1,"ok":true,"x":null}`, "", ""},
		{"escaped backslash is not NUL", `{"a":"\\u0000"}`, "", ""},
		{"replacement character is fine", `{"a":"\ufffd"}`, "", ""},
		{"NUL in a value", `{"objective":"a\u0000b"}`, "objective", jsontext.ReasonNUL},
		{"NUL in a nested array", `{"a":{"tags":["ok","x\u0000"]}}`, "a.tags[1]", jsontext.ReasonNUL},
		{"NUL after a nested object", `{"a":{"b":"c"},"d":[1,{"e":"\u0000"}]}`, "d[1].e", jsontext.ReasonNUL},
		{"NUL in a key", `{"meta":{"k\u0000":"v"}}`, "meta.k", "a key " + jsontext.ReasonNUL},
		{"invalid UTF-8 in a value", "{\"content\":\"caf\xe9\"}", "content", jsontext.ReasonNotUTF8},
		{"invalid UTF-8 after valid text", "{\"a\":\"\xc3\xa9\",\"b\":[\"\xff\"]}", "b[0]", jsontext.ReasonNotUTF8},
		{"top-level string", `"\u0000"`, "", jsontext.ReasonNUL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := jsontext.Check([]byte(tt.doc))
			require.NoError(t, err)
			if tt.reason == "" {
				assert.Nil(t, p)
				return
			}
			require.NotNil(t, p)
			assert.Equal(t, tt.path, p.Path)
			assert.Equal(t, tt.reason, p.Reason)
		})
	}
	_, err := jsontext.Check([]byte(`{"a":`))
	assert.Error(t, err, "not JSON")
}

func TestClean(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "ab\uFFFDc", jsontext.Clean("a\x00b\xffc"))
	assert.Equal(t, "fine", jsontext.Clean("fine"))
}

// FuzzCheck holds Check to its promise: a document it accepts decodes
// into strings that hold neither NUL nor invalid UTF-8 (as the API and the
// ACL then rely on), and it never panics.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"a":"b"}`, `{"a":"\u0000"}`, "{\"a\":\"\xff\"}", `[1,{"k":["x",{"y":"z"}]}]`, `"s"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := jsontext.Check(data)
		if err != nil || p != nil {
			if p != nil && p.Reason == "" {
				t.Fatalf("a problem without a reason: %+v", p)
			}
			return
		}
		if !json.Valid(data) {
			return // trailing garbage after a value: the decoder refuses it
		}
		var v any
		if json.Unmarshal(data, &v) != nil {
			return
		}
		var walk func(any)
		walk = func(v any) {
			switch x := v.(type) {
			case string:
				if jsontext.CheckString(x) != "" {
					t.Fatalf("accepted %q", x)
				}
			case []any:
				for _, e := range x {
					walk(e)
				}
			case map[string]any:
				for k, e := range x {
					walk(k)
					walk(e)
				}
			}
		}
		walk(v)
		if !utf8.Valid(data) {
			// Invalid bytes outside strings are not JSON at all.
			t.Fatalf("accepted invalid UTF-8 in %q", data)
		}
	})
}
