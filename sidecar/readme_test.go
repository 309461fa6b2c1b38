package sidecar_test

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/sidecar/protocol"
	"github.com/agentbus/agentbus/sidecar/protocol/protocoltest"
)

// strictly decodes raw into a new T, failing on unknown fields.
func strictly[T any](t *testing.T, what string, raw []byte) T {
	t.Helper()
	var v T
	require.NoError(t, protocoltest.Strictly(raw, &v), "%s: %s", what, raw)
	return v
}

func TestREADMEDocumentsEveryEventAndCommandWithAValidExample(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("README.md")
	require.NoError(t, err)
	doc := string(raw)

	examples, err := protocoltest.Examples(doc)
	require.NoError(t, err, "every heading has a JSON example of an entry")
	var documented []string
	for _, entry := range examples {
		name := entry.Name
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
	block, err := protocoltest.ConfigExample(doc)
	require.NoError(t, err)
	cfg := strictly[protocol.Config](t, "config", block)
	cfg.SetDefaults()
	assert.NoError(t, cfg.Validate())
}

func decodeCommand(t *testing.T, name string, data json.RawMessage) {
	t.Helper()
	switch name {
	case protocol.CommandSteeringMessage:
		m := strictly[protocol.SteeringMessage](t, name, data)
		assert.NoError(t, m.Validate())
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
		// A command whose data has no rule beyond its shape.
		v, ok := protocol.NewData(name)
		require.True(t, ok, "no decoder for command %s", name)
		require.NoError(t, protocoltest.Strictly(data, v), "%s: %s", name, data)
	}
}
