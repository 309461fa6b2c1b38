package main

import (
	"os"

	"github.com/agentbus/agentbus/api"
	"github.com/agentbus/agentbus/handlers/webhooks"
)

// withMCPPolicy is cfg letting MCP servers be on loopback and private
// addresses when the operator sets AGENTBUS_MCP_ALLOW_PRIVATE=1 (tests, a
// local setup), and webhooks when they set AGENTBUS_WEBHOOK_ALLOW_PRIVATE=1
// (the webhooks worker reads the same); metadata and link-local addresses
// stay refused.
func withMCPPolicy(cfg api.Config) api.Config {
	cfg.MCPAllowPrivate = os.Getenv(api.MCPAllowPrivateEnv) == "1"
	cfg.WebhookAllowPrivate = os.Getenv(webhooks.AllowPrivateEnv) == "1"
	return cfg
}

// withTraceURL is cfg linking each session to its trace in the tracing UI
// AGENTBUS_TRACE_URL names, e.g. http://localhost:16686/trace/{traceId}.
func withTraceURL(cfg api.Config) api.Config {
	cfg.TraceURL = os.Getenv(api.TraceURLEnv)
	return cfg
}
