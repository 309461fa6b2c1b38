package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentbus/agentbus/api"
	agentcmd "github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/doors"
	wsdoor "github.com/agentbus/agentbus/doors/ws"
	commandsworker "github.com/agentbus/agentbus/handlers/commands"
	"github.com/agentbus/agentbus/internal/health"
	"github.com/agentbus/agentbus/postgres/queries"
	"github.com/agentbus/agentbus/sidecar/runners"
)

// newAPI builds the HTTP API on in's connections: commands go to the
// commands worker through JetStream, queries read Postgres, and people's
// tokens are checked with jwtSecret. checks are the process's readiness
// checks, nil for the API's own (Postgres and NATS). What it starts stops
// when ctx ends; call Close on the server too.
func newAPI(ctx context.Context, in *infra, checks *health.Checks, jwtSecret string) (*api.Server, error) {
	pool, nc, js := in.Pool, in.NC, in.JS
	sessionPool, err := in.sessionPool()
	if err != nil {
		return nil, err
	}
	client, err := agentcmd.NewClient(nc, js, commandsworker.Results{Pool: pool})
	if err != nil {
		return nil, fmt.Errorf("api: command client: %w", err)
	}
	store := queries.New(pool, sessionPool)
	if checks == nil {
		checks = &health.Checks{}
		checks.Add("postgres", pool.Ping)
		checks.Add("nats", func(ctx context.Context) error {
			if !nc.IsConnected() {
				return errors.New("not connected")
			}
			_, err := js.AccountInfo(ctx)
			return err
		})
	}
	ws, err := in.workspace()
	if err != nil {
		return nil, err
	}
	reg, err := in.Metrics()
	if err != nil {
		return nil, err
	}
	places, err := runnerPlaces(ctx, js)
	if err != nil {
		return nil, err
	}
	if err := reg.Register(&runners.Collector{Store: places}); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		return nil, err
	}
	// Where the runtime of this host keeps the checkpoint stores (dirsOf),
	// read, never made, here.
	dataDir := in.DataDir
	if dataDir == "" {
		dataDir = envOr("AGENTBUS_DATA_DIR", ".agentbus")
	}
	if dataDir, err = filepath.Abs(dataDir); err != nil {
		return nil, err
	}
	cfg := api.Config{JWTSecret: jwtSecret, Workspace: ws, CheckpointDir: filepath.Join(dataDir, "checkpoints")}
	srv, err := api.New(withTraceURL(withMCPPolicy(withJWTClaims(cfg))), api.Deps{
		Runners:       places,
		AgentKeys:     store,
		SessionOwners: store,
		Idempotency:   api.NewPostgresIdempotency(pool),
		JetStream:     js,
		Checks:        checks,
		Commands:      client,
		Results:       commandsworker.Results{Pool: pool},
		Queries:       store,
		WebhookDB:     pool,
		Metrics:       reg,
	})
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	doorCfg, err := doorConfig()
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	srv.Handle("GET "+wsdoor.Path, wsdoor.NewHandler(doorCfg, srv, srv, doors.JetStreamFeed{JS: js}))
	go func() {
		<-ctx.Done()
		_ = client.Close()
	}()
	return srv, nil
}

// runAPI serves the HTTP API alone, on an existing Postgres and NATS; the
// commands worker and the outbox publisher run elsewhere.
func runAPI(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("api", flag.ExitOnError)
	httpAddr := fs.String("http", envOr("AGENTBUS_HTTP", "127.0.0.1:8080"), "HTTP listen address")
	databaseURL := fs.String("database-url", os.Getenv("DATABASE_URL"), "Postgres URL (default $DATABASE_URL)")
	natsURL := fs.String("nats-url", envOr("NATS_URL", "nats://127.0.0.1:4222"), "NATS servers, comma-separated (default $NATS_URL)")
	poolMaxArg := poolMaxFlag(fs)
	dev := fs.Bool("dev", false, "without "+jwtSecretEnv+", accept tokens signed with the public development secret (a developer's machine only)")
	_ = fs.Parse(args)
	if *databaseURL == "" {
		return errors.New("no database: set DATABASE_URL or --database-url")
	}
	secret, err := standaloneSecret(*dev)
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}

	in := &infra{}
	defer in.Close()
	if in.PoolMax, err = poolMax(*poolMaxArg); err != nil {
		return err
	}
	if err := in.connectNATSWithEnvReplicas(ctx, *natsURL); err != nil {
		return err
	}
	if err := in.connectPostgres(ctx, *databaseURL); err != nil {
		return err
	}
	apiCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv, err := newAPI(apiCtx, in, nil, secret)
	if err != nil {
		return err
	}
	defer srv.Close()

	reg, err := in.Metrics()
	if err != nil {
		return err
	}
	httpSrv := newHTTPServer(*httpAddr, withMetrics(withUI(srv), reg))
	slog.Info("api starting", "component", "api", "http", "http://"+*httpAddr, "nats", *natsURL)
	if err := runComponents(ctx, []component{{"http", func(ctx context.Context) error { return serveHTTP(ctx, httpSrv) }}}); err != nil {
		return fmt.Errorf("api: %w", err)
	}
	return nil
}
