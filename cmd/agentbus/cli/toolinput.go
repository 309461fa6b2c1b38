package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// maxInputLines bounds how many lines of a file's content or a diff a
// tool call shows: enough to judge it, not the whole file.
const maxInputLines = 12

// toolInputText is a tool call's input as people read it: a shell
// command as the command, an edit as a diff of its file, a write as the
// lines written, a question with its options; anything else as its JSON
// with its text unescaped.
func toolInputText(raw json.RawMessage) string {
	var in map[string]any
	if json.Unmarshal(raw, &in) != nil || in == nil {
		return oneLine(string(raw), 200)
	}
	str := func(k string) string { s, _ := in[k].(string); return s }
	switch {
	case str("command") != "":
		return "$ " + str("command")
	case str("file_path") != "" && (in["old_string"] != nil || in["new_string"] != nil):
		return str("file_path") + "\n" + diffLines(str("old_string"), str("new_string"))
	case str("file_path") != "" && in["content"] != nil:
		return str("file_path") + "\n" + prefixed("+ ", str("content"))
	case in["questions"] != nil:
		return questionsText(in["questions"])
	case str("pattern") != "":
		text := str("pattern")
		if p := str("path"); p != "" {
			text += " in " + p
		}
		return text
	case str("file_path") != "" && len(in) == 1:
		return str("file_path")
	}
	return plainJSON(in)
}

// diffLines is an edit as the lines removed and the lines added.
func diffLines(old, new string) string {
	parts := []string{}
	if old != "" {
		parts = append(parts, prefixed("- ", old))
	}
	if new != "" {
		parts = append(parts, prefixed("+ ", new))
	}
	return strings.Join(parts, "\n")
}

// prefixed is text with each of its first lines led by prefix, and how
// many more lines there are.
func prefixed(prefix, text string) string {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	more := 0
	if len(lines) > maxInputLines {
		more = len(lines) - maxInputLines
		lines = lines[:maxInputLines]
	}
	for i, l := range lines {
		lines[i] = prefix + l
	}
	if more > 0 {
		lines = append(lines, fmt.Sprintf("  … %d more lines", more))
	}
	return strings.Join(lines, "\n")
}

// questionsText is AskUserQuestion's questions, each with its options.
func questionsText(v any) string {
	qs, _ := v.([]any)
	var out []string
	for _, q := range qs {
		m, _ := q.(map[string]any)
		text, _ := m["question"].(string)
		var labels []string
		opts, _ := m["options"].([]any)
		for _, o := range opts {
			if om, ok := o.(map[string]any); ok {
				if l, ok := om["label"].(string); ok {
					labels = append(labels, l)
				}
			}
		}
		if len(labels) > 0 {
			text += " [" + strings.Join(labels, " | ") + "]"
		}
		out = append(out, text)
	}
	return strings.Join(out, "\n")
}

// plainJSON is v as compact JSON whose strings keep <, > and & as they
// are (encoding/json escapes them for HTML by default).
func plainJSON(v map[string]any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return oneLine(strings.TrimSpace(b.String()), 200)
}
