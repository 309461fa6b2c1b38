package cli

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestToolInputTextIsReadable shows each kind of tool input as people
// read it, never as escaped JSON.
func TestToolInputTextIsReadable(t *testing.T) {
	for _, tc := range []struct {
		name, input, want string
	}{
		{"a shell command, its redirection unescaped", `{"command":"go test ./... \u003e out.txt \u0026\u0026 cat out.txt","description":"Run"}`,
			"$ go test ./... > out.txt && cat out.txt"},
		{"an edit as a diff", `{"file_path":"/w/main.go","old_string":"func main() {","new_string":"// main starts.\nfunc main() {"}`,
			"/w/main.go\n- func main() {\n+ // main starts.\n+ func main() {"},
		{"a write as the lines written", `{"file_path":"/w/config.yaml","content":"port: 8080\n"}`,
			"/w/config.yaml\n+ port: 8080"},
		{"a question with its options", `{"questions":[{"question":"Which database?","options":[{"label":"PostgreSQL"},{"label":"SQLite"}]}]}`,
			"Which database? [PostgreSQL | SQLite]"},
		{"a search", `{"pattern":"func Handle","path":"/w"}`, "func Handle in /w"},
		{"a read", `{"file_path":"/w/go.mod"}`, "/w/go.mod"},
		{"anything else as JSON without HTML escapes", `{"url":"https://x/?a=1\u0026b=\u003c2\u003e"}`, `{"url":"https://x/?a=1&b=<2>"}`},
		{"not an object", `"just text"`, `"just text"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, toolInputText([]byte(tc.input)))
		})
	}
}

func TestALongWriteIsCut(t *testing.T) {
	content := ""
	for range 20 {
		content += "line\n"
	}
	got := toolInputText([]byte(`{"file_path":"/w/a","content":` + strconv.Quote(content) + `}`))
	assert.Contains(t, got, "+ line\n")
	assert.Contains(t, got, "… 8 more lines")
}
