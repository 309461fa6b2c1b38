package sidecar_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/sidecar/protocol"
)

func TestValidationRunsWhereTheAgentWorksWithAnAllowListedEnvironment(t *testing.T) {
	t.Setenv("AGENTBUS_JWT_SECRET", "server-secret-value")
	t.Setenv("DATABASE_URL", "postgres://server-secret-value@127.0.0.1/agentbus")
	cfg := scriptConfig(t, "default")
	cfg.StayIdle = true
	require.NoError(t, os.WriteFile(filepath.Join(cfg.WorkingDirectory, "built"), nil, 0o644))
	h := start(t, cfg)
	h.waitFor("the work is done", func(e protocol.Entry) bool {
		return e.Type == protocol.EventTurnCompleted && decode[protocol.TurnCompleted](t, e).Done
	})

	id := h.send(protocol.CommandRunValidation, protocol.RunValidation{TimeoutMS: 500, Checks: []protocol.ValidationCheck{
		{Name: "CustomCommand", Command: "test -f built && pwd"},
		{Name: "CustomCommand", Command: "env; exit 3"},
		{Name: "TestsPassing", Command: "sleep 30"},
	}})
	res := decode[protocol.ValidationResult](t, h.waitType(protocol.EventValidationResult))
	assert.Equal(t, id, res.CommandID)
	require.Len(t, res.Checks, 3)

	assert.Equal(t, 0, res.Checks[0].ExitCode, res.Checks[0].Output)
	assert.Equal(t, cfg.WorkingDirectory+"\n", res.Checks[0].Output, "it runs in the session's working directory")

	env := res.Checks[1]
	assert.Equal(t, 3, env.ExitCode)
	assert.Contains(t, env.Output, "PATH=")
	for _, secret := range []string{"server-secret-value", "REDIS_URL", "AGENTBUS_SESSION_KEY", "DATABASE_URL"} {
		assert.NotContains(t, env.Output, secret, "the check's environment is allow-listed")
	}

	assert.True(t, res.Checks[2].TimedOut)
	assert.Equal(t, -1, res.Checks[2].ExitCode)
	assert.Empty(t, h.ofType(protocol.EventSessionEnd), "the session goes on")
}

func TestRunValidationWithoutChecksIsAnError(t *testing.T) {
	cfg := scriptConfig(t, "default")
	cfg.StayIdle = true
	h := start(t, cfg)
	id := h.send(protocol.CommandRunValidation, protocol.RunValidation{})
	e := decode[protocol.ErrorEvent](t, h.waitType(protocol.EventError))
	assert.Equal(t, id, e.CommandID)
	assert.Contains(t, e.Message, "checks are required")
}
