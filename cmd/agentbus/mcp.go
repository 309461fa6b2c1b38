package main

import (
	"os"

	"github.com/agentbus/agentbus/api"
)

// withMCPPolicy is cfg letting MCP servers be on loopback and private
// addresses when the operator sets AGENTBUS_MCP_ALLOW_PRIVATE=1 (tests, a
// local setup); metadata and link-local addresses stay refused.
func withMCPPolicy(cfg api.Config) api.Config {
	cfg.MCPAllowPrivate = os.Getenv(api.MCPAllowPrivateEnv) == "1"
	return cfg
}
