// Package protocoltest reads the examples of sidecar/README.md, the
// protocol's documentation for sidecars written in other languages, so
// that tests can hold the documentation and the Go types to each other.
package protocoltest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

var (
	typeHeading = regexp.MustCompile("(?m)^### `([a-z_]+)`$")
	jsonBlock   = regexp.MustCompile("(?s)```json\n(.*?)\n```")
)

// Example is the example entry README.md gives under an event's or a
// command's heading.
type Example struct {
	// Name is the heading: the type the example documents.
	Name string `json:"-"`
	// Raw is the example as written.
	Raw []byte `json:"-"`
	// Type, TS, CommandID and Data are the example's fields.
	Type      string          `json:"type"`
	TS        int64           `json:"ts"`
	CommandID string          `json:"command_id"`
	Data      json.RawMessage `json:"data"`
}

// Examples returns the example of every type heading of doc, in the order
// of the document. A heading without a JSON example, or an example that
// is not an entry (unknown fields included), is an error.
func Examples(doc string) ([]Example, error) {
	headings := typeHeading.FindAllStringSubmatchIndex(doc, -1)
	out := make([]Example, 0, len(headings))
	for i, h := range headings {
		name := doc[h[2]:h[3]]
		end := len(doc)
		if i+1 < len(headings) {
			end = headings[i+1][0]
		}
		block := jsonBlock.FindStringSubmatch(doc[h[1]:end])
		if block == nil {
			return nil, fmt.Errorf("%s has no JSON example", name)
		}
		ex := Example{Name: name, Raw: []byte(block[1])}
		if err := Strictly([]byte(block[1]), &ex); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, ex)
	}
	return out, nil
}

// ConfigExample returns the JSON example of the "## Config" section.
func ConfigExample(doc string) ([]byte, error) {
	i := strings.Index(doc, "\n## Config\n")
	if i < 0 {
		return nil, fmt.Errorf("no Config section")
	}
	block := jsonBlock.FindStringSubmatch(doc[i:])
	if block == nil {
		return nil, fmt.Errorf("the Config section has no JSON example")
	}
	return []byte(block[1]), nil
}

// Strictly decodes raw into v, refusing fields v does not have.
func Strictly(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
