package api

import "github.com/agentbus/agentbus/internal/netguard"

// MCPAllowPrivateEnv names the operator's switch that lets MCP servers be
// on loopback and private addresses (tests, a local setup).
const MCPAllowPrivateEnv = "AGENTBUS_MCP_ALLOW_PRIVATE"

// checkMCPServerURL returns why the URL of an MCP server is refused, or
// "": the URL of an MCP server is reached by the sessions' agents, which
// run untrusted code, so it may not send them to what only the machine or
// its cloud account should see (netguard.CheckURL).
func checkMCPServerURL(raw string, allowPrivate bool) string {
	return netguard.CheckURL(raw, netguard.Policy{AllowPrivate: allowPrivate, Switch: MCPAllowPrivateEnv})
}
