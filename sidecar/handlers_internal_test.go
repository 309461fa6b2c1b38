package sidecar

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentbus/agentbus/command/control"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// The sidecar handles exactly the protocol's commands, among them the
// command of every two-phase control the control plane sends.
func TestEveryCommandHasAHandler(t *testing.T) {
	for _, typ := range protocol.CommandTypes {
		assert.Contains(t, commandHandlers, typ)
	}
	assert.Len(t, commandHandlers, len(protocol.CommandTypes))
	for _, c := range control.All() {
		assert.Contains(t, commandHandlers, string(c.Sidecar), "control %s", c.Name)
	}
}
