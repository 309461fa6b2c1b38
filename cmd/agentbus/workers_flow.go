package main

import (
	"context"
	"os"
	"path/filepath"
	"sync"

	agentcmd "github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/handlers/acl"
	cmdhandlers "github.com/agentbus/agentbus/handlers/commands"
	"github.com/agentbus/agentbus/handlers/reactions"
	"github.com/agentbus/agentbus/relay"
	"github.com/agentbus/agentbus/sidecar/launcher"
)

// The workers that turn raw events into state and make the session flows
// run by themselves; each is one entry of the workers registry.
func init() {
	workers["acl"] = worker{
		summary: "translate raw sidecar events (AGENTS_SIDECAR_EVENTS) into commands and the activity stream",
		needs:   needPostgres | needNATS,
		conns:   func() int { return 9 },
		run: func(ctx context.Context, in *infra) error {
			client, err := commandClient(in)
			if err != nil {
				return err
			}
			return acl.New(in.Pool, client).Run(ctx, in.JS)
		},
	}
	workers["sidecar-dispatch"] = worker{
		summary: "send lifecycle requests, answers and decisions to the sessions' sidecars",
		needs:   needNATS,
		conns:   func() int { return 0 },
		run: func(ctx context.Context, in *infra) error {
			return reactions.SidecarDispatch{JS: in.JS}.Run(ctx)
		},
	}
	workers["pool"] = worker{
		summary: "allocate a pool slot to each new session, release it when the session ends, start the next Queued one",
		needs:   needPostgres | needNATS,
		conns:   func() int { return 2 },
		run: func(ctx context.Context, in *infra) error {
			client, err := commandClient(in)
			if err != nil {
				return err
			}
			return reactions.Pool{JS: in.JS, DB: in.Pool, Client: client}.Run(ctx)
		},
	}
	workers["delivery"] = worker{
		summary: "deliver queued and steering messages to the sidecars when the session takes them",
		needs:   needPostgres | needNATS,
		conns:   func() int { return 4 },
		run: func(ctx context.Context, in *infra) error {
			return reactions.Delivery{JS: in.JS, DB: in.Pool}.Run(ctx)
		},
	}
	workers["handoff"] = worker{
		summary: "continue an exhausted session in a new one of its chain, with the handoff document",
		needs:   needPostgres | needNATS,
		conns:   func() int { return 2 },
		run: func(ctx context.Context, in *infra) error {
			client, err := commandClient(in)
			if err != nil {
				return err
			}
			return reactions.Handoff{JS: in.JS, DB: in.Pool, Client: client}.Run(ctx)
		},
	}
	workers["relay"] = worker{
		summary: "bridge each session's Redis streams and JetStream",
		needs:   needNATS | needRedis,
		conns:   func() int { return 0 },
		run: func(ctx context.Context, in *infra) error {
			r, err := relay.New(relay.Config{Redis: in.Redis, JetStream: in.JS})
			if err != nil {
				return err
			}
			return r.Run(ctx)
		},
	}
	workers["runtime"] = worker{
		summary: "start each allocated session's sidecar (AGENTBUS_RUNTIME=process|external, AGENTBUS_ENGINE=script|claude)",
		needs:   needPostgres | needNATS | needRedis,
		conns:   func() int { return 2 },
		run: func(ctx context.Context, in *infra) error {
			mode := launcher.Mode(envOr("AGENTBUS_RUNTIME", string(launcher.ModeProcess)))
			logDir := filepath.Join(envOr("AGENTBUS_DATA_DIR", ".agentbus"), "log", "sidecars")
			if err := os.MkdirAll(logDir, 0o755); err != nil {
				return err
			}
			l, err := launcher.New(launcher.Config{Mode: mode, Redis: in.Redis, RedisURL: in.RedisURL,
				APIURL: os.Getenv("AGENTBUS_API_URL"), LogDir: logDir})
			if err != nil {
				return err
			}
			return reactions.Runtime{JS: in.JS, DB: in.Pool, Launcher: l, Engine: os.Getenv("AGENTBUS_ENGINE")}.Run(ctx)
		},
	}
}

// commandClient returns the process's one command client, made on first use.
func commandClient(in *infra) (*agentcmd.Client, error) {
	clientOnce.Do(func() {
		sharedClient, clientErr = agentcmd.NewClient(in.NC, in.JS, cmdhandlers.Results{Pool: in.Pool})
	})
	return sharedClient, clientErr
}

var (
	clientOnce   sync.Once
	sharedClient *agentcmd.Client
	clientErr    error
)
