package script_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/sidecar/engine/script"
)

func TestEmbeddedScenariosAreTheDocumentedOnesAndParse(t *testing.T) {
	t.Parallel()
	want := []string{"config", "default", "exhaust", "fail", "files", "handoff", "long", "permission", "plan", "question", "suite", "walkthrough"}
	assert.Equal(t, want, script.Scenarios())
	for _, name := range want {
		sc, err := script.LoadScenario(name)
		require.NoError(t, err, name)
		assert.Equal(t, name, sc.Name)
		assert.NotEmpty(t, sc.Description, name)
		assert.NotEmpty(t, sc.Turns, name)
	}
}

func TestParseScenarioRejectsBadSteps(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"unknown kind":         `{"turns":[{"steps":[{"kind":"dance"}]}]}`,
		"tool without tool":    `{"turns":[{"steps":[{"kind":"tool"}]}]}`,
		"usage without usage":  `{"turns":[{"steps":[{"kind":"usage"}]}]}`,
		"empty turn":           `{"turns":[{"steps":[]}]}`,
		"question in subagent": `{"turns":[{"steps":[{"kind":"subagent","subagent":{"type":"x","steps":[{"kind":"question"}]}}]}]}`,
		"handoff without doc":  `{"turns":[{"steps":[{"kind":"voluntary_handoff"}]}]}`,
		"not JSON":             `{`,
		"write outside":        `{"turns":[{"steps":[{"kind":"write","files":{"../x":"y"}}]}]}`,
		"write without files":  `{"turns":[{"steps":[{"kind":"write"}]}]}`,
	}
	for name, raw := range cases {
		_, err := script.ParseScenario([]byte(raw))
		assert.Error(t, err, name)
	}
	_, err := script.LoadScenario("nope")
	assert.ErrorContains(t, err, "default")
}
