package main

import (
	"context"
	"os"

	"github.com/agentbus/agentbus/cmd/agentbus/cli"
)

// The commands for people at a terminal, clients of the HTTP API.
func init() {
	commands["sessions"] = command{"list, start, steer, watch and control your sessions (sessions help)", runSessions}
	commands["templates"] = command{"list, show, create and edit your templates (templates help)", runTemplates}
	commands["skills"] = command{"list, show, create and edit your skills (skills help)", runSkills}
	commands["pool"] = command{"show your session pool, or size it: pool [--max N]", runPoolCommand}
	commands["webhooks"] = command{"your webhooks and their delivery logs (webhooks help)", runWebhooksCommand}
}

func runWebhooksCommand(ctx context.Context, args []string) error {
	return cli.Webhooks(ctx, args, os.Stdout, os.Stderr)
}

func runSessions(ctx context.Context, args []string) error {
	return cli.Sessions(ctx, args, os.Stdout, os.Stderr)
}

func runPoolCommand(ctx context.Context, args []string) error {
	return cli.Pool(ctx, args, os.Stdout, os.Stderr)
}

func runTemplates(ctx context.Context, args []string) error {
	return cli.Templates(ctx, args, os.Stdout, os.Stderr)
}

func runSkills(ctx context.Context, args []string) error {
	return cli.Skills(ctx, args, os.Stdout, os.Stderr)
}
