package main

import (
	"context"

	"github.com/agentbus/agentbus/sidecar"
)

// runSidecar runs one agent session's sidecar:
// agentbus sidecar --session <id> [--config <file>], with REDIS_URL,
// AGENTBUS_API_URL and AGENTBUS_SESSION_KEY from the environment. It logs
// JSON lines with component=sidecar and the session_id.
func runSidecar(ctx context.Context, args []string) error {
	return sidecar.Main(ctx, args)
}
