package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/internal/credentials"
	"github.com/agentbus/agentbus/internal/health"
	"github.com/agentbus/agentbus/internal/localserver"
	natsconf "github.com/agentbus/agentbus/nats"
	"github.com/agentbus/agentbus/sidecar/workspace"
)

// infra holds the connections every component needs, and whatever private
// servers were started to provide them.
type infra struct {
	Pool  *pgxpool.Pool
	Redis *redis.Client
	NC    *nats.Conn
	JS    jetstream.JetStream
	// DatabaseURL and RedisURL are handed on to child processes.
	DatabaseURL string
	RedisURL    string
	NATSURL     string
	// APIURL is this deployment's HTTP API, handed to agents; empty when
	// the process serves none (AGENTBUS_API_URL names it then).
	APIURL string
	// DataDir is where this process keeps its files; empty means
	// $AGENTBUS_DATA_DIR, else .agentbus.
	DataDir string
	// Workspace is the root of the sessions' working directories; empty
	// means $AGENTBUS_WORKSPACE, else <data dir>/workspace.
	Workspace string
	// PoolMax is the session pool size of users who set none of their
	// own (--pool-max); 0 is domain.DefaultMaxConcurrentSessions.
	PoolMax int
	// Sandbox is how the runtime confines its sidecars.
	Sandbox sandboxSettings
	// RunnerCapacity is how many sidecars the runtime's own runner runs;
	// 0 runs none (runners elsewhere run them all).
	RunnerCapacity int

	stops   []func()
	metrics *prometheus.Registry
}

// Close closes the connections and stops the private servers, newest first.
func (in *infra) Close() {
	for i := len(in.stops) - 1; i >= 0; i-- {
		in.stops[i]()
	}
}

func (in *infra) onClose(f func()) { in.stops = append(in.stops, f) }

// workspace returns the root of the sessions' working directories,
// created if missing.
func (in *infra) workspace() (workspace.Root, error) {
	dir := in.Workspace
	if dir == "" {
		dir = os.Getenv("AGENTBUS_WORKSPACE")
	}
	if dir == "" {
		data, err := in.dataDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(data, "workspace")
	}
	return workspace.New(dir)
}

// dataDir returns the absolute data directory, created if missing.
func (in *infra) dataDir() (string, error) {
	dir := in.DataDir
	if dir == "" {
		dir = envOr("AGENTBUS_DATA_DIR", ".agentbus")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return dir, os.MkdirAll(dir, 0o755)
}

// Checks returns the readiness checks of the connections that are open.
func (in *infra) Checks() *health.Checks {
	var checks health.Checks
	if state := in.Sandbox.state(); state != "" {
		checks.Info("sandbox", state)
	}
	if in.Pool != nil {
		checks.Add("postgres", in.Pool.Ping)
	}
	if in.Redis != nil {
		checks.Add("redis", func(ctx context.Context) error { return in.Redis.Ping(ctx).Err() })
	}
	if in.NC != nil {
		checks.Add("nats", func(ctx context.Context) error {
			if !in.NC.IsConnected() {
				return errors.New("not connected")
			}
			_, err := in.JS.AccountInfo(ctx)
			return err
		})
	}
	return &checks
}

// connectPostgres opens a pool on url.
func (in *infra) connectPostgres(ctx context.Context, url string) error {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return fmt.Errorf("postgres: %w", err)
	}
	in.Pool, in.DatabaseURL = pool, url
	in.onClose(pool.Close)
	return nil
}

// connectRedis opens a client on url.
func (in *infra) connectRedis(ctx context.Context, url string) error {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	client := redis.NewClient(opts)
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return fmt.Errorf("redis: %w", err)
	}
	in.Redis, in.RedisURL = client, url
	in.onClose(func() { _ = client.Close() })
	return nil
}

// connectNATS connects to url and provisions the streams and consumers,
// or, connected as a component's user, which may not, checks that they
// are there.
func (in *infra) connectNATS(ctx context.Context, rawURL string, replicas int) error {
	nc, js, err := bus.Connect(ctx, rawURL, append([]nats.Option{nats.Name("agentbus")}, natsAuth()...)...)
	if err != nil {
		return err
	}
	in.NC, in.JS, in.NATSURL = nc, js, redacted(rawURL)
	in.onClose(func() { _ = nc.Drain() })
	if user := natsUser(rawURL); user != "" && user != "operator" {
		return bus.Verify(ctx, js)
	}
	return bus.ProvisionWith(ctx, js, bus.ProvisionOptions{Replicas: replicas})
}

// natsUser is the NATS user this process connects as: the one in its URL,
// else NATS_USER; empty for a server without users (or NATS_CREDS).
func natsUser(rawURL string) string {
	for _, one := range strings.Split(rawURL, ",") {
		if u, err := url.Parse(strings.TrimSpace(one)); err == nil && u.User != nil {
			return u.User.Username()
		}
	}
	return os.Getenv("NATS_USER")
}

// natsAuth returns the credentials of this component's NATS user:
// NATS_CREDS names a credentials file, else NATS_USER and NATS_PASSWORD
// (nats/users.conf has one user per component). A user and password in
// NATS_URL itself work as well, and take precedence over these.
func natsAuth() []nats.Option {
	if creds := os.Getenv("NATS_CREDS"); creds != "" {
		return []nats.Option{nats.UserCredentials(creds)}
	}
	if user := os.Getenv("NATS_USER"); user != "" {
		return []nats.Option{nats.UserInfo(user, os.Getenv("NATS_PASSWORD"))}
	}
	return nil
}

// startPrivatePostgres runs Postgres from the machine's binaries under dir
// and returns the URL of its agentbus database.
func (in *infra) startPrivatePostgres(ctx context.Context, dir string, port int) (string, error) {
	logFile, err := openLog(dir, "postgres.log")
	if err != nil {
		return "", err
	}
	password, err := credentials.Password(dir, "postgres")
	if err != nil {
		return "", err
	}
	pg, err := localserver.StartPostgres(ctx, localserver.PostgresConfig{
		Dir: filepath.Join(dir, "postgres"), Port: port, Durable: true, Log: logFile, Password: password})
	if err != nil {
		return "", err
	}
	in.onClose(pg.Stop)
	if err := pg.CreateDatabase(ctx, "agentbus"); err != nil {
		return "", err
	}
	slog.Info("private postgres started", "component", "up", "port", port)
	return pg.URL("agentbus"), nil
}

// startPrivateRedis runs redis-server under dir with its append-only file
// and the users of redisUsers, the default user off. It returns the URL of
// up's own user, and every user's URL by its credentials.env variable.
func (in *infra) startPrivateRedis(ctx context.Context, dir string, port int) (string, map[string]string, error) {
	logFile, err := openLog(dir, "redis.log")
	if err != nil {
		return "", nil, err
	}
	users, err := privateRedisUsers(dir)
	if err != nil {
		return "", nil, err
	}
	r, err := localserver.StartRedis(ctx, localserver.RedisConfig{
		Dir: filepath.Join(dir, "redis"), Port: port, Durable: true, Log: logFile, Users: users})
	if err != nil {
		return "", nil, err
	}
	in.onClose(r.Stop)
	urls := map[string]string{}
	for i, u := range users {
		urls[redisUsers[i].env] = r.UserURL(u)
	}
	slog.Info("private redis started", "component", "up", "port", port)
	return r.URL(), urls, nil
}

// startEmbeddedNATS runs nats-server in this process with its store under
// dir and the users of nats/users.conf, their passwords generated and kept
// in dir. It returns the server's URL and the operator's URL to it, with
// the password: this process provisions the streams and consumers.
func (in *infra) startEmbeddedNATS(dir string, port, httpPort int) (plain, operator string, err error) {
	users, err := bus.UsersConfig(natsconf.Users, func(user string) (string, error) {
		return credentials.Password(dir, "nats-"+user)
	})
	if err != nil {
		return "", "", err
	}
	srv, err := bus.StartEmbedded(bus.EmbeddedConfig{
		StoreDir: filepath.Join(dir, "nats"), Port: port, HTTPPort: httpPort,
		Logger: slog.Default(), Users: users,
	})
	if err != nil {
		return "", "", err
	}
	in.onClose(func() { shutdownNATS(srv) })
	password, err := credentials.Password(dir, "nats-operator")
	if err != nil {
		return "", "", err
	}
	u, err := url.Parse(srv.ClientURL())
	if err != nil {
		return "", "", err
	}
	u.User = url.UserPassword("operator", password)
	slog.Info("embedded nats started", "component", "up", "url", srv.ClientURL())
	return srv.ClientURL(), u.String(), nil
}

// redacted returns a server URL without the password it may hold.
func redacted(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}

func shutdownNATS(srv *server.Server) {
	srv.Shutdown()
	done := make(chan struct{})
	go func() { srv.WaitForShutdown(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}

func openLog(dir, name string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Join(dir, "log"), 0o755); err != nil {
		return nil, err
	}
	return os.OpenFile(filepath.Join(dir, "log", name), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
}
