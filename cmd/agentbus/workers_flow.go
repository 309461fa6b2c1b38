package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/feed"
	agentcmd "github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/handlers/acl"
	cmdhandlers "github.com/agentbus/agentbus/handlers/commands"
	"github.com/agentbus/agentbus/handlers/projections"
	"github.com/agentbus/agentbus/handlers/reactions"
	"github.com/agentbus/agentbus/relay"
	"github.com/agentbus/agentbus/sidecar/engine/claude"
	"github.com/agentbus/agentbus/sidecar/runners"
)

// The workers that turn raw events into state and make the session flows
// run by themselves; each is one entry of the workers registry.
func init() {
	declareSidecarEventWorkers()
	declareSessionReactions()
	declareTimedWorkers()
	declareRuntimeWorkers()
}

// declareSidecarEventWorkers declares the workers of the sidecars' raw
// events and of their commands.
func declareSidecarEventWorkers() {
	workers["acl"] = worker{
		summary: "translate raw sidecar events (AGENTS_SIDECAR_EVENTS) into commands and the activity stream",
		needs:   needPostgres | needNATS,
		conns:   func() int { return 9 },
		consumes: []consumer{reaction(bus.StreamSidecarEvents, acl.Consumer,
			"The anti-corruption layer: turns raw sidecar events into domain commands.", bus.SidecarEventSubject("*", ">")).
			retrying(8, rawEventsBackoff...)},
		publishes: []string{bus.AllCommandsFilter(), bus.AggregateEventsFilter(feed.Aggregate)},
		run: withClient(func(ctx context.Context, in *infra, client *agentcmd.Client) error {
			return acl.New(in.Pool, client).Run(ctx, in.JS)
		}),
	}
	workers["transcript"] = worker{
		summary: "project raw sidecar events (AGENTS_SIDECAR_EVENTS) into each session's messages, tool calls, subagents and log",
		needs:   needPostgres | needNATS,
		conns:   func() int { return 5 },
		consumes: []consumer{reaction(bus.StreamSidecarEvents, projections.Consumer,
			"The transcript projection: writes each session's messages, tool calls, subagents and log from its raw sidecar events.",
			bus.SidecarEventSubject("*", ">")).retrying(8, rawEventsBackoff...)},
		run: func(ctx context.Context, in *infra) error {
			return projections.NewTranscript(in.Pool).Run(ctx, in.JS)
		},
	}
	workers["sidecar-dispatch"] = worker{
		summary: "send lifecycle requests, answers and decisions to the sessions' sidecars",
		needs:   needPostgres | needNATS,
		conns:   func() int { return 2 },
		consumes: []consumer{reaction(bus.StreamEvents, reactions.SidecarDispatchConsumer,
			"Sends lifecycle requests, answers and decisions to the sessions' sidecars.", reactions.SidecarDispatchFilters()...)},
		publishes: []string{bus.SidecarCommandSubject("*", ">")},
		run: func(ctx context.Context, in *infra) error {
			return reactions.SidecarDispatch{JS: in.JS, DB: in.Pool}.Run(ctx)
		},
	}
}

// declareSessionReactions declares the reactions to the sessions' domain
// events.
func declareSessionReactions() {
	workers["pool"] = worker{
		summary: "ask a pool slot for each new or retried session; release it when the session ends, starting Queued ones in the free slots",
		needs:   needPostgres | needNATS,
		conns:   func() int { return 2 },
		consumes: []consumer{reaction(bus.StreamEvents, reactions.PoolConsumer,
			"Allocates a pool slot to each new or retried session and releases it when the session ends.",
			reactions.PoolFilters()...)},
		publishes: []string{bus.AllCommandsFilter()},
		run: withClient(func(ctx context.Context, in *infra, client *agentcmd.Client) error {
			return reactions.Pool{JS: in.JS, Client: client}.Run(ctx)
		}),
	}
	workers["delivery"] = worker{
		summary: "deliver queued and steering messages to the sidecars when the session takes them",
		needs:   needPostgres | needNATS,
		conns:   func() int { return 4 },
		consumes: []consumer{reaction(bus.StreamEvents, reactions.DeliveryConsumer,
			"Delivers queued and steering messages when the session takes them.",
			reactions.DeliveryFilters()...)},
		publishes: []string{bus.SidecarCommandSubject("*", ">")},
		run: func(ctx context.Context, in *infra) error {
			return reactions.Delivery{JS: in.JS, DB: in.Pool}.Run(ctx)
		},
	}
	workers["handoff"] = worker{
		summary: "continue an exhausted session in a new one of its chain, with the handoff document",
		needs:   needPostgres | needNATS,
		conns:   func() int { return 2 },
		consumes: []consumer{reaction(bus.StreamEvents, reactions.HandoffConsumer,
			"Continues an exhausted session in a new one of its chain.",
			reactions.HandoffFilters()...)},
		publishes: []string{bus.AllCommandsFilter()},
		run: withClient(func(ctx context.Context, in *infra, client *agentcmd.Client) error {
			limit, err := maxChainSessions()
			if err != nil {
				return err
			}
			return reactions.Handoff{JS: in.JS, DB: in.Pool, Client: client, MaxChainSessions: limit}.Run(ctx)
		}),
	}
	workers["consolidate"] = worker{
		summary: "fold an approved consolidation session's output into its skill's instructions",
		needs:   needPostgres | needNATS,
		conns:   func() int { return 2 },
		consumes: []consumer{reaction(bus.StreamEvents, reactions.ConsolidateConsumer,
			"Folds an approved consolidation session's output into its skill.", reactions.ConsolidateFilters()...).unordered()},
		publishes: []string{bus.AllCommandsFilter()},
		run: withClient(func(ctx context.Context, in *infra, client *agentcmd.Client) error {
			return reactions.Consolidate{JS: in.JS, DB: in.Pool, Client: client}.Run(ctx)
		}),
	}
	workers["notify"] = worker{
		summary: "turn completions, failures, budget and context alerts into notifications for the owner",
		needs:   needPostgres | needNATS,
		conns:   func() int { return 2 },
		consumes: []consumer{reaction(bus.StreamEvents, reactions.NotifyConsumer,
			"Turns completions, failures, budget and context alerts into notifications.",
			reactions.NotifyFilters()...)},
		publishes: []string{bus.AggregateEventsFilter(reactions.AggregateNotification)},
		run: func(ctx context.Context, in *infra) error {
			return reactions.Notify{JS: in.JS, DB: in.Pool}.Run(ctx)
		},
	}
}

// declareTimedWorkers declares the workers that act on time: timeouts,
// schedules, and the checks after each turn.
func declareTimedWorkers() {
	workers["timeouts"] = worker{
		summary:   "expire unanswered questions, undecided tool permissions and pauses held too long",
		needs:     needPostgres | needNATS,
		conns:     func() int { return 2 },
		publishes: []string{bus.AllCommandsFilter()},
		run: withClient(func(ctx context.Context, in *infra, client *agentcmd.Client) error {
			return reactions.Timeouts{DB: in.Pool, Client: client}.Run(ctx)
		}),
	}
	workers["scheduler"] = worker{
		summary:   "start a session of each scheduled template at each due time, as its owner, in <workspace>/<owner>/scheduled/ (AGENTBUS_SCHEDULE_GRACE, default 1h)",
		needs:     needPostgres | needNATS,
		conns:     func() int { return 2 },
		publishes: []string{bus.AllCommandsFilter()},
		deploy: deployment{
			note:      "It names each session's directory under /workspace/<owner id>/scheduled/, so it mounts the workspace the runtime starts the agents in.",
			workspace: true,
		},
		run: withClient(func(ctx context.Context, in *infra, client *agentcmd.Client) error {
			grace, err := scheduleGrace()
			if err != nil {
				return err
			}
			ws, err := in.workspace()
			if err != nil {
				return err
			}
			return reactions.Scheduler{DB: in.Pool, Client: client, Workspace: ws, Grace: grace}.Run(ctx)
		}),
	}
	workers["autocontinue"] = worker{
		summary: "validate a session after each turn and continue it while validation fails (runs commands in its working directory)",
		needs:   needPostgres | needNATS,
		conns:   func() int { return 4 },
		consumes: []consumer{
			reaction(bus.StreamEvents, reactions.AutoContinueConsumer, "Auto-continue: asks the sidecar to validate a session whose turn ended.",
				reactions.AutoContinueFilters()...),
			reaction(bus.StreamSidecarEvents, reactions.AutoContinueResultsConsumer, "Auto-continue: continues a session whose validation failed.",
				reactions.AutoContinueResultsFilters()...),
		},
		publishes: []string{bus.AllCommandsFilter()},
		deploy:    deployment{note: "It mounts no workspace: the sessions' sidecars run the validation criteria where the agent works."},
		run: withClient(func(ctx context.Context, in *infra, client *agentcmd.Client) error {
			return reactions.AutoContinue{JS: in.JS, DB: in.Pool, Client: client}.Run(ctx)
		}),
	}
}

// declareRuntimeWorkers declares the relay and the runtime, which run the
// sessions' sidecars and bridge their streams.
func declareRuntimeWorkers() {
	workers["relay"] = worker{
		summary: "bridge each session's Redis streams and JetStream",
		needs:   needNATS | needRedis,
		conns:   func() int { return 0 },
		consumes: []consumer{reaction(bus.StreamSidecarCommands, relay.DefaultOutboundConsumer,
			"The relay: writes each sidecar command to the session's Redis command stream.", bus.SidecarCommandSubject("*", ">")).
			retrying(6, 5*time.Second, 10*time.Second, 30*time.Second, time.Minute, 5*time.Minute)},
		publishes: []string{"$JS.FC.>", bus.SidecarEventSubject("*", ">"), "$KV." + relay.SessionsBucket + ".>", "$KV." + relay.MembersBucket + ".>"},
		deploy:    deployment{service: "relay", command: "relay"},
		run: func(ctx context.Context, in *infra) error {
			r, err := relay.New(relay.Config{Redis: in.Redis, JetStream: in.JS})
			if err != nil {
				return err
			}
			return r.Run(ctx)
		},
	}
	workers["runtime"] = worker{
		summary: "keep one sidecar per live session, each in a sandbox of its own, placed on the runners by capacity and moved when one dies; runs a runner of this host (AGENTBUS_RUNNER_CAPACITY, default what it holds; 0 none; AGENTBUS_RUNTIME=process|external, AGENTBUS_ENGINE=script|claude)",
		needs:   needPostgres | needNATS | needRedis,
		conns:   func() int { return 2 },
		consumes: []consumer{reaction(bus.StreamEvents, reactions.RuntimeConsumer,
			"Starts and stops the sessions' sidecar processes.",
			reactions.RuntimeFilters()...)},
		publishes: []string{bus.AllCommandsFilter(), "$KV." + relay.SessionsBucket + ".>",
			"$KV." + runners.RunnersBucket + ".>", "$KV." + runners.AssignmentsBucket + ".>"},
		deploy: deployment{
			note: "Sessions work under /workspace/<owner id>/, the host's $AGENTBUS_WORKSPACE (./workspace by default). " +
				"Each sidecar runs in a bubblewrap sandbox made of user namespaces, which Docker's default seccomp and AppArmor profiles " +
				"refuse in a container, hence its security_opt; the host must allow unprivileged user namespaces (on Ubuntu 24.04, " +
				"kernel.apparmor_restrict_unprivileged_userns=0). Without them the worker refuses to start and says why; " +
				"AGENTBUS_UNSANDBOXED=1 runs the agents unconfined instead. " +
				"It places the sessions on the runners below and runs no sidecar itself (AGENTBUS_RUNNER_CAPACITY 0); " +
				"the runners read the checkpoint stores it writes, in the checkpoints volume.",
			env:         []string{"AGENTBUS_DATA_DIR: /data", `AGENTBUS_RUNNER_CAPACITY: "0"`},
			workspace:   true,
			volumes:     []string{`&checkpoints "checkpoints:/data/checkpoints"`},
			securityOpt: []string{"seccomp=unconfined", "apparmor=unconfined"},
		},
		run: runRuntimeWorker,
	}
}

// scheduleGrace reads AGENTBUS_SCHEDULE_GRACE: how late a due time the
// scheduler missed may still start.
func scheduleGrace() (time.Duration, error) {
	v := os.Getenv("AGENTBUS_SCHEDULE_GRACE")
	if v == "" {
		return reactions.DefaultScheduleGrace, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("AGENTBUS_SCHEDULE_GRACE=%q: want a positive duration such as 1h or 15m", v)
	}
	return d, nil
}

// engineEnv is what the engine's sidecars are told beyond the variables
// they inherit (launcher.DefaultInheritEnv): the claude engine gets the
// CLI that this process finds, so a sidecar in another directory runs the
// same one.
func engineEnv(engine string) []string {
	if engine != claude.Name || os.Getenv(claude.EnvBinary) != "" {
		return nil
	}
	bin, err := claude.FindBinary()
	if err != nil {
		return nil // the sidecar reports the missing CLI as its session's failure
	}
	if abs, err := filepath.Abs(bin); err == nil {
		bin = abs
	}
	return []string{claude.EnvBinary + "=" + bin}
}

// withClient runs a worker that sends commands with the infra's client.
func withClient(run func(ctx context.Context, in *infra, client *agentcmd.Client) error) func(context.Context, *infra) error {
	return func(ctx context.Context, in *infra) error {
		client, err := commandClient(in)
		if err != nil {
			return err
		}
		return run(ctx, in, client)
	}
}

// commandClient returns the command client of in, made on first use and
// shared by the workers running on in. It is kept per infra and closed
// with it: an infra opened later in the process (up started again) must
// not get a client of a connection that is closed.
func commandClient(in *infra) (*agentcmd.Client, error) {
	clientsMu.Lock()
	defer clientsMu.Unlock()
	if c, ok := clients[in]; ok {
		return c, nil
	}
	c, err := agentcmd.NewClient(in.NC, in.JS, cmdhandlers.Results{Pool: in.Pool})
	if err != nil {
		return nil, err
	}
	clients[in] = c
	in.onClose(func() {
		clientsMu.Lock()
		delete(clients, in)
		clientsMu.Unlock()
		_ = c.Close()
	})
	return c, nil
}

var (
	clientsMu sync.Mutex
	clients   = map[*infra]*agentcmd.Client{}
)

// maxChainSessions reads AGENTBUS_MAX_CHAIN_SESSIONS, how many sessions a
// chain may hold (default domain.DefaultMaxChainSessions).
func maxChainSessions() (int, error) {
	v := os.Getenv("AGENTBUS_MAX_CHAIN_SESSIONS")
	if v == "" {
		return domain.DefaultMaxChainSessions, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("AGENTBUS_MAX_CHAIN_SESSIONS=%q: want a positive number", v)
	}
	return n, nil
}
