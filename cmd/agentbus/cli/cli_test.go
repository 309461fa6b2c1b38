package cli

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTheTokenComesFromTheEnvironmentButHelpNeverPrintsIt(t *testing.T) {
	const secret = "eyJ.secret.token"
	t.Setenv("AGENTBUS_TOKEN", secret)
	var out, errs bytes.Buffer
	e := newEnv(context.Background(), &out, &errs)
	fs := e.flags("sessions ls", "list your sessions")
	fs.Usage()
	assert.NotContains(t, errs.String(), secret)
	assert.Contains(t, errs.String(), "$AGENTBUS_TOKEN")

	require.NoError(t, fs.Parse(nil))
	assert.Equal(t, secret, e.token, "without --token, the environment's token is used")
	require.NoError(t, fs.Parse([]string{"--token", "other"}))
	assert.Equal(t, "other", e.token)
}
