package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbus/agentbus/api"
	"github.com/agentbus/agentbus/doors"
	"github.com/agentbus/agentbus/doors/localsocket"
	"github.com/agentbus/agentbus/internal/credentials"
	"github.com/agentbus/agentbus/postgres/migrations"
)

// devUserID is the user of the development token that up prints.
const devUserID = "00000000-0000-4000-8000-000000000001"

// upConfig is what `agentbus up` is told by flags and environment.
type upConfig struct {
	dataDir     string
	httpAddr    string
	natsURL     string
	natsPort    int
	natsHTTP    int
	databaseURL string
	redisURL    string
	pgPort      int
	redisPort   int
	workspace   string
	socket      string
	// socketUsers are the users local socket peers' uids are mapped to.
	socketUsers uidUsers
}

func runUp(ctx context.Context, args []string) error {
	var cfg upConfig
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	fs.StringVar(&cfg.dataDir, "data-dir", envOr("AGENTBUS_DATA_DIR", ".agentbus"), "where embedded NATS, Postgres and Redis keep their data")
	fs.StringVar(&cfg.httpAddr, "http", envOr("AGENTBUS_HTTP", "127.0.0.1:8080"), "HTTP listen address (API, /healthz, /readyz)")
	fs.StringVar(&cfg.natsURL, "nats-url", os.Getenv("NATS_URL"), "use this NATS server instead of the embedded one")
	fs.IntVar(&cfg.natsPort, "nats-port", 4222, "client port of the embedded NATS server (loopback)")
	fs.IntVar(&cfg.natsHTTP, "nats-monitor-port", 8222, "monitoring port of the embedded NATS server (loopback)")
	fs.StringVar(&cfg.databaseURL, "database-url", os.Getenv("DATABASE_URL"), "use this Postgres instead of a private one")
	fs.StringVar(&cfg.redisURL, "redis-url", os.Getenv("REDIS_URL"), "use this Redis instead of a private one")
	fs.IntVar(&cfg.pgPort, "postgres-port", 15432, "port of the private Postgres (loopback)")
	fs.IntVar(&cfg.redisPort, "redis-port", 16379, "port of the private Redis (loopback)")
	fs.StringVar(&cfg.workspace, "workspace", os.Getenv("AGENTBUS_WORKSPACE"), "root of the sessions' working directories (default <data-dir>/workspace)")
	fs.StringVar(&cfg.socket, "socket", os.Getenv("AGENTBUS_SOCKET"), "the local NDJSON socket's file (default <data-dir>/"+socketFile+"); \"off\" serves none")
	fs.Var(&cfg.socketUsers, "socket-user-for-uid", "UID=USER: a local socket peer of this uid acts for USER (a user id) without a token; repeatable. Without it, every connection authenticates with a token")
	without := fs.String("without-workers", "", "comma-separated workers not to run in this process (run them elsewhere with `agentbus worker <name>`)")
	poolMaxArg := poolMaxFlag(fs)
	sandboxArgs := addSandboxFlags(fs)
	capacity := fs.String("runner-capacity", os.Getenv("AGENTBUS_RUNNER_CAPACITY"),
		"how many sidecars the runner of this process runs (default what the machine holds); 0 runs none, leaving them to `agentbus runner`s")
	_ = fs.Parse(args)
	skip := map[string]bool{}
	for _, name := range strings.Split(*without, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		if _, ok := workers[name]; !ok {
			return fmt.Errorf("up: --without-workers: unknown worker %q (have %s)", name, strings.Join(workerNames(), ", "))
		}
		skip[name] = true
	}

	dataDir, err := filepath.Abs(cfg.dataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	in := &infra{DataDir: dataDir, Workspace: cfg.workspace, APIURL: "http://" + cfg.httpAddr}
	defer in.Close()
	if in.PoolMax, err = poolMax(*poolMaxArg); err != nil {
		return err
	}
	if in.RunnerCapacity, err = runnerCapacity(*capacity); err != nil {
		return fmt.Errorf("up: --runner-capacity: %w", err)
	}
	if in.Sandbox, err = sandboxArgs.settings(!skip["runtime"]); err != nil {
		return fmt.Errorf("up: %w", err)
	}
	if err := startInfra(ctx, in, cfg, dataDir); err != nil {
		return err
	}

	secret, err := dataDirSecret(dataDir, true)
	if err != nil {
		return err
	}
	apiServer, err := newAPI(ctx, in, in.Checks(), secret)
	if err != nil {
		return err
	}
	defer apiServer.Close()
	// No write timeout: live streams stay open; each SSE write has its own deadline.
	reg, err := in.Metrics()
	if err != nil {
		return err
	}
	srv := newHTTPServer(cfg.httpAddr, withMetrics(withUI(apiServer), reg))
	token, err := signToken(secret, devUserID, 30*24*time.Hour)
	if err != nil {
		return err
	}

	components := []component{
		{"http", func(ctx context.Context) error { return serveHTTP(ctx, srv) }},
	}
	if cfg.socket != "off" {
		sock, err := upSocket(cfg, dataDir, secret, apiServer, in)
		switch {
		case err == nil:
			components = append(components, component{"local socket", sock.Serve})
		case cfg.socket == "":
			// The default place may not do (a data directory too deep for
			// a socket's path, another up on it): up runs without it.
			slog.Warn("no local socket", "component", "up", "err", err)
		default:
			return err
		}
	}
	// Every worker runs here, as `agentbus worker <name>` would run it alone.
	for _, name := range workerNames() {
		if skip[name] {
			continue
		}
		w := workers[name]
		components = append(components, component{"worker " + name, func(ctx context.Context) error { return w.run(ctx, in) }})
	}
	slog.Info("agentbus is up", "component", "up",
		"http", "http://"+cfg.httpAddr, "nats", in.NATSURL, "data_dir", dataDir)
	ws, err := in.workspace()
	if err != nil {
		return err
	}
	upBanner{HTTPAddr: cfg.httpAddr, NATSURL: in.NATSURL, Credentials: filepath.Join(dataDir, credentials.EnvFile),
		Token: token, UserID: devUserID, DataDir: dataDir, Workspace: string(ws), Runtime: !skip["runtime"]}.write(os.Stderr)
	return runComponents(ctx, components)
}

// startInfra connects to, or starts, NATS, Postgres and Redis, and brings
// the schema and the streams up to date.
func startInfra(ctx context.Context, in *infra, cfg upConfig, dataDir string) error {
	natsURL, shown := cfg.natsURL, redacted(cfg.natsURL)
	if natsURL == "" {
		var err error
		if shown, natsURL, err = in.startEmbeddedNATS(dataDir, cfg.natsPort, cfg.natsHTTP); err != nil {
			return err
		}
	}
	if err := in.connectNATSWithEnvReplicas(ctx, natsURL); err != nil {
		return err
	}
	in.NATSURL = shown
	dbURL := cfg.databaseURL
	if dbURL == "" {
		var err error
		if dbURL, err = in.startPrivatePostgres(ctx, dataDir, cfg.pgPort); err != nil {
			return err
		}
	}
	version, err := migrations.Apply(ctx, dbURL)
	if err != nil {
		return err
	}
	slog.Info("database migrated", "component", "up", "version", version)
	// One pool for every worker and four more connections for the HTTP API.
	if err := in.connectPostgres(ctx, withPoolSize(dbURL, poolSize(workerNames()...)+4)); err != nil {
		return err
	}
	in.DatabaseURL = dbURL
	// The operator's tools (agentbus migrate, psql, redis-cli) and the
	// components run apart find the servers' credentials here, outside
	// every sandbox.
	env := map[string]string{"DATABASE_URL": dbURL, "NATS_URL": natsURL, "AGENTBUS_API_URL": in.APIURL}
	redisURL := cfg.redisURL
	if redisURL == "" {
		var urls map[string]string
		if redisURL, urls, err = in.startPrivateRedis(ctx, dataDir, cfg.redisPort); err != nil {
			return err
		}
		maps.Copy(env, urls)
	} else {
		// The components' users are the private Redis's: none here.
		for _, u := range redisUsers {
			env[u.env] = ""
		}
	}
	env["REDIS_URL"] = redisURL
	if err := in.connectRedis(ctx, redisURL); err != nil {
		return err
	}
	return credentials.WriteEnv(dataDir, env)
}

// component is one long-running part of the process.
type component struct {
	name string
	run  func(ctx context.Context) error
}

// runComponents runs every component until ctx ends or one of them fails,
// then stops the others and waits for them.
func runComponents(ctx context.Context, components []component) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(components))
	for _, c := range components {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := c.run(ctx)
			if err != nil && !errors.Is(err, context.Canceled) {
				errs <- fmt.Errorf("%s: %w", c.name, err)
			}
			cancel()
		}()
	}
	wg.Wait()
	close(errs)
	return errors.Join(collect(errs)...)
}

func collect(errs <-chan error) []error {
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}

// serveHTTP serves until ctx ends, then shuts the server down gracefully.
// Shutting down cancels the requests' contexts, so the live streams, which
// never finish by themselves, end at once instead of holding the shutdown.
func serveHTTP(ctx context.Context, srv *http.Server) error {
	base, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	srv.BaseContext = func(net.Listener) context.Context { return base }
	srv.RegisterOnShutdown(cancelRequests)
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	}
}

func envOr(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}

// connectNATSWithEnvReplicas connects as connectNATS does, with the
// replicas NATS_REPLICAS asks for: 3 on the compose cluster, unset for the
// files' own setting. A value that is not a number is an error, not the
// default: a cluster would otherwise run single-replica streams unnoticed.
func (in *infra) connectNATSWithEnvReplicas(ctx context.Context, natsURL string) error {
	n := 0
	if v := os.Getenv("NATS_REPLICAS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			return fmt.Errorf("NATS_REPLICAS=%q: want a positive number", v)
		}
	}
	return in.connectNATS(ctx, natsURL, n)
}

// upSocket opens the local socket of up, on the API and the feed of this
// process: a connection acts for the user of the token it presents,
// verified by the API, or for the user --socket-user-for-uid maps its
// peer's uid to (with a token signed by up's secret).
func upSocket(cfg upConfig, dataDir, secret string, apiServer *api.Server, in *infra) (*localsocket.Server, error) {
	path := cfg.socket
	if path == "" {
		path = filepath.Join(dataDir, socketFile)
	}
	doorCfg, err := doorConfig()
	if err != nil {
		return nil, err
	}
	feed := doors.JetStreamFeed{JS: in.JS}
	as := func(user, authz string) localsocket.Caller {
		return localsocket.Caller{UserID: user, API: doors.InProcess{Handler: apiServer, Authorization: authz}, Feed: feed}
	}
	creds := localsocket.Credentials{
		Token: func(_ context.Context, token string) (localsocket.Caller, error) {
			authz := "Bearer " + token
			user, err := apiServer.AuthenticateBearer(authz)
			if err != nil {
				return localsocket.Caller{}, &doors.Error{Kind: doors.KindUnauthorized, Status: http.StatusUnauthorized, Message: err.Error()}
			}
			return as(user, authz), nil
		},
		ByUID: map[uint32]func() (localsocket.Caller, error){},
	}
	for uid, user := range cfg.socketUsers {
		creds.ByUID[uid] = func() (localsocket.Caller, error) {
			token, err := signToken(secret, user, 30*24*time.Hour)
			return as(user, "Bearer "+token), err
		}
	}
	return serveSocket(path, doorCfg.Config, creds)
}
