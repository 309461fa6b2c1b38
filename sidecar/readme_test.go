package sidecar_test

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/sidecar/protocol"
)

var (
	typeHeading = regexp.MustCompile("(?m)^### `([a-z_]+)`$")
	jsonBlock   = regexp.MustCompile("(?s)```json\n(.*?)\n```")
)

// strictly decodes raw into a new T, failing on unknown fields.
func strictly[T any](t *testing.T, what string, raw []byte) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&v), "%s: %s", what, raw)
	return v
}

func TestREADMEDocumentsEveryEventAndCommandWithAValidExample(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("README.md")
	require.NoError(t, err)
	doc := string(raw)

	headings := typeHeading.FindAllStringSubmatchIndex(doc, -1)
	var documented []string
	for i, h := range headings {
		name := doc[h[2]:h[3]]
		end := len(doc)
		if i+1 < len(headings) {
			end = headings[i+1][0]
		}
		block := jsonBlock.FindStringSubmatch(doc[h[1]:end])
		require.NotNil(t, block, "%s has a JSON example", name)
		entry := strictly[struct {
			Type      string          `json:"type"`
			TS        int64           `json:"ts"`
			CommandID string          `json:"command_id"`
			Data      json.RawMessage `json:"data"`
		}](t, name, []byte(block[1]))
		assert.Equal(t, name, entry.Type, "the example of %s has its type", name)
		assert.Positive(t, entry.TS, name)
		documented = append(documented, name)

		switch {
		case slices.Contains(protocol.EventTypes, name):
			assert.Empty(t, entry.CommandID, "%s is an event", name)
			strictDecode(t, protocol.Entry{Type: name, Data: entry.Data})
		case slices.Contains(protocol.CommandTypes, name):
			assert.NotEmpty(t, entry.CommandID, "%s is a command", name)
			decodeCommand(t, name, entry.Data)
		default:
			t.Errorf("README documents %q, which is neither an event nor a command", name)
		}
	}
	assert.ElementsMatch(t, append(slices.Clone(protocol.EventTypes), protocol.CommandTypes...), documented)

	// The config example is a valid config.
	i := strings.Index(doc, "\n## Config\n")
	require.Positive(t, i)
	block := jsonBlock.FindStringSubmatch(doc[i:])
	require.NotNil(t, block)
	cfg := strictly[protocol.Config](t, "config", []byte(block[1]))
	cfg.SetDefaults()
	assert.NoError(t, cfg.Validate())
}

func decodeCommand(t *testing.T, name string, data json.RawMessage) {
	t.Helper()
	switch name {
	case protocol.CommandSteeringMessage:
		m := strictly[protocol.SteeringMessage](t, name, data)
		assert.NoError(t, m.Validate())
	case protocol.CommandInterrupt:
		strictly[protocol.Interrupt](t, name, data)
	case protocol.CommandPause:
		strictly[protocol.Pause](t, name, data)
	case protocol.CommandResume:
		strictly[protocol.Resume](t, name, data)
	case protocol.CommandStop:
		strictly[protocol.Stop](t, name, data)
	case protocol.CommandReloadConfig:
		r := strictly[protocol.ReloadConfig](t, name, data)
		require.NotNil(t, r.Config)
		assert.NoError(t, r.Config.Validate())
	case protocol.CommandAnswerQuestion:
		assert.NoError(t, strictly[protocol.AnswerQuestion](t, name, data).Validate())
	case protocol.CommandPlanDecision:
		assert.NoError(t, strictly[protocol.PlanDecision](t, name, data).Validate())
	case protocol.CommandPermissionResponse:
		assert.NoError(t, strictly[protocol.PermissionResponse](t, name, data).Validate())
	case protocol.CommandRunValidation:
		assert.NoError(t, strictly[protocol.RunValidation](t, name, data).Validate())
	default:
		t.Errorf("no decoder for command %s", name)
	}
}
