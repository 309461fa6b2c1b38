package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus/bustest"
	agentcmd "github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/internal/credentials"
	"github.com/agentbus/agentbus/internal/localserver"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/internal/uptest"
)

// TestMain doubles as the agentbus binary for `agentbus sidecar`: the
// runtime of an `up` under test starts its sidecars from this executable;
// and for `agentbus worker`, which a test runs as a process of its own to
// kill it.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == "sidecar" || os.Args[1] == "socket" || os.Args[1] == "worker" || os.Args[1] == "runner" || os.Args[1] == "runners") {
		main()
		return
	}
	if len(os.Args) > 1 && os.Args[1] == standInRunnerCommand {
		runStandInMain(os.Args[2:])
	}
	testenv.Main(m)
}

func freePort(t testing.TB) int {
	t.Helper()
	p, err := localserver.FreePort()
	require.NoError(t, err)
	return p
}

// TestUpStartsReadyAndKeepsDataAcrossRestart runs `agentbus up` on private
// servers twice over the same data directory.
func TestUpStartsReadyAndKeepsDataAcrossRestart(t *testing.T) {
	dataDir, err := testenv.TempDir("up")
	require.NoError(t, err)
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	pgPort, redisPort := freePort(t), freePort(t)
	natsPort := freePort(t)
	args := []string{"--data-dir", dataDir, "--http", httpAddr,
		"--nats-port", fmt.Sprint(natsPort), "--nats-monitor-port", "0",
		"--postgres-port", fmt.Sprint(pgPort), "--redis-port", fmt.Sprint(redisPort),
		"--database-url", "", "--redis-url", "", "--nats-url", ""}

	start := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- runUp(ctx, args) }()
		require.Eventually(t, func() bool {
			resp, err := http.Get("http://" + httpAddr + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}, 90*time.Second, 100*time.Millisecond, "up did not become ready")
		return func() {
			cancel()
			select {
			case err := <-done:
				assert.NoError(t, err)
			case <-time.After(60 * time.Second):
				t.Fatal("up did not stop")
			}
		}
	}

	stop := start()
	natsURL := uptest.Credentials(t, dataDir)["NATS_URL"]
	sessionID := startSessionThroughUp(t, natsURL)
	dbURL := uptest.Credentials(t, dataDir)["DATABASE_URL"]
	serversRefuseClientsWithoutCredentials(t, dataDir, pgPort, redisPort, natsPort)
	conn, err := pgx.Connect(context.Background(), dbURL)
	require.NoError(t, err)
	_, err = conn.Exec(context.Background(), "INSERT INTO processed_messages (consumer, message_id) VALUES ('up-test', 'kept')")
	require.NoError(t, err)
	require.NoError(t, conn.Close(context.Background()))
	stop()

	_, err = http.Get("http://" + httpAddr + "/readyz")
	require.Error(t, err, "nothing listens once up has stopped")

	stop = start()
	defer stop()
	assert.Equal(t, dbURL, uptest.Credentials(t, dataDir)["DATABASE_URL"], "up keeps its servers' passwords across restarts")
	serversRefuseClientsWithoutCredentials(t, dataDir, pgPort, redisPort, natsPort)
	conn, err = pgx.Connect(context.Background(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var n int
	require.NoError(t, conn.QueryRow(context.Background(), "SELECT count(*) FROM processed_messages WHERE consumer = 'up-test'").Scan(&n))
	assert.Equal(t, 1, n, "data survives a restart of up")
	require.NoError(t, conn.QueryRow(context.Background(), "SELECT count(*) FROM sessions WHERE id = $1", sessionID).Scan(&n))
	assert.Equal(t, 1, n, "the session survives a restart of up")
	startSessionThroughUp(t, natsURL)
	_, err = os.Stat(dataDir + "/nats")
	assert.NoError(t, err)
}

// serversRefuseClientsWithoutCredentials checks that the private Postgres
// and Redis and the embedded NATS of the up of dataDir take only the credentials it keeps in
// credentials.env (mode 0600), and no client with none or the defaults.
func serversRefuseClientsWithoutCredentials(t *testing.T, dataDir string, pgPort, redisPort, natsPort int) {
	t.Helper()
	ctx := context.Background()
	info, err := os.Stat(filepath.Join(dataDir, credentials.EnvFile))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "credentials.env is its owner's only")
	env := uptest.Credentials(t, dataDir)

	conn, err := pgx.Connect(ctx, env["DATABASE_URL"])
	require.NoError(t, err, "the URL of credentials.env logs into Postgres")
	require.NoError(t, conn.Close(ctx))
	for _, url := range []string{
		fmt.Sprintf("postgres://postgres@127.0.0.1:%d/agentbus?sslmode=disable", pgPort),
		fmt.Sprintf("postgres://postgres:postgres@127.0.0.1:%d/agentbus?sslmode=disable", pgPort),
		fmt.Sprintf("postgres://agentbus:agentbus@127.0.0.1:%d/agentbus?sslmode=disable", pgPort),
	} {
		conn, err := pgx.Connect(ctx, url)
		if err == nil {
			_ = conn.Close(ctx)
		}
		assert.ErrorContains(t, err, "password authentication failed", "Postgres let in %s", url)
	}

	rdb := uptest.RedisOf(t, dataDir, 0)
	require.NoError(t, rdb.Ping(ctx).Err(), "the URL of credentials.env logs into Redis")
	for _, name := range []string{"REDIS_RELAY_URL", "REDIS_RUNTIME_URL", "REDIS_API_URL"} {
		opts, err := redis.ParseURL(env[name])
		require.NoError(t, err, name)
		c := redis.NewClient(opts)
		assert.NoError(t, c.Ping(ctx).Err(), "the %s of credentials.env logs into Redis", name)
		_ = c.Close()
	}
	apiOpts, err := redis.ParseURL(env["REDIS_API_URL"])
	require.NoError(t, err)
	api := redis.NewClient(apiOpts)
	defer api.Close()
	assert.ErrorContains(t, api.Set(ctx, "agentbus:probe", "x", 0).Err(), "NOPERM", "the api's Redis user only reads")
	anonymous := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", redisPort)})
	defer anonymous.Close()
	assert.ErrorContains(t, anonymous.Ping(ctx).Err(), "NOAUTH", "Redis let in a client without credentials")
	wrong := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", redisPort), Username: "agentbus", Password: "wrong"})
	defer wrong.Close()
	assert.ErrorContains(t, wrong.Ping(ctx).Err(), "WRONGPASS", "Redis let in a wrong password")
	def := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", redisPort), Username: "default", Password: ""})
	defer def.Close()
	assert.Error(t, def.Ping(ctx).Err(), "Redis let in its default user")

	nc, err := nats.Connect(env["NATS_URL"])
	require.NoError(t, err, "the URL of credentials.env logs into NATS")
	nc.Close()
	for _, opt := range []nats.Option{nats.Name("anonymous"), nats.UserInfo("operator", "change-me-operator"), nats.UserInfo("api", "")} {
		nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", natsPort), opt)
		if err == nil {
			nc.Close()
		}
		assert.ErrorIs(t, err, nats.ErrAuthorization, "NATS let in a client without its credentials")
	}
}

// startSessionThroughUp sends start_session through a command client
// connected to the NATS server at natsURL and checks that the commands
// worker answers it and the outbox publisher puts the session's events on
// AGENTS_EVENTS.
func startSessionThroughUp(t *testing.T, natsURL string) uuid.UUID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := nats.Connect(natsURL)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	client, err := agentcmd.NewClient(nc, js, nil)
	require.NoError(t, err)
	defer func() { _ = client.Close() }()

	id := uuid.New()
	cmd, err := agentcmd.New(domain.AggregateSession, agentcmd.StartSession, id, uuid.NewString(),
		agentcmd.StartSessionData{WorkingDirectory: "/work/repo", Objective: "Say hello", BudgetCapUsd: domain.Dollars(1)})
	require.NoError(t, err)
	result, err := client.Do(ctx, cmd)
	require.NoError(t, err, "the commands worker answers")
	require.NoError(t, result.Err())
	var started agentcmd.StartSessionResult
	require.NoError(t, json.Unmarshal(result.State, &started))
	assert.Equal(t, id, started.Session.ID)
	assert.Equal(t, domain.StatusQueued, started.Session.Status)

	stream, err := js.Stream(ctx, "AGENTS_EVENTS")
	require.NoError(t, err)
	subject := "agents.evt.session." + id.String() + ".>"
	require.Eventually(t, func() bool {
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter(subject))
		return err == nil && len(info.State.Subjects) > 0
	}, 30*time.Second, 20*time.Millisecond, "the outbox publisher publishes the session's events")
	return id
}

// TestWorkerRunsEachWorkerAlone runs `agentbus worker commands` and
// `agentbus worker outbox` as separate components on a shared Postgres and
// NATS: a command gets its result and its events reach AGENTS_EVENTS.
func TestWorkerRunsEachWorkerAlone(t *testing.T) {
	dbURL := testenv.PostgresURL(t)
	srv, _, _ := bustest.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, name := range []string{"commands", "outbox"} {
		httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, runWorker(ctx, []string{name, "--http", httpAddr,
				"--database-url", dbURL, "--nats-url", srv.ClientURL(), "--redis-url", ""}))
		}()
		require.Eventually(t, func() bool {
			resp, err := http.Get("http://" + httpAddr + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}, 30*time.Second, 50*time.Millisecond, "worker %s did not become ready", name)
	}
	startSessionThroughUp(t, srv.ClientURL())
	cancel()
	wg.Wait()
}

func TestWorkerRefusesAnUnknownName(t *testing.T) {
	err := runWorker(context.Background(), []string{"nope"})
	require.Error(t, err)
	for _, name := range workerNames() {
		assert.Contains(t, err.Error(), name, "the error lists every worker")
	}
}

func TestWithPoolSize(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, url, want string }{
		{"url", "postgres://u@h/db", "postgres://u@h/db?pool_max_conns=11"},
		{"url with query", "postgres://u@h/db?sslmode=disable", "postgres://u@h/db?sslmode=disable&pool_max_conns=11"},
		{"key=value", "host=h dbname=db", "host=h dbname=db pool_max_conns=11"},
		{"size given", "postgres://u@h/db?pool_max_conns=3", "postgres://u@h/db?pool_max_conns=3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, withPoolSize(c.url, 11))
		})
	}
	assert.Equal(t, 2+9+2, poolSize("commands", "outbox"), "8 handlers and a spare, the outbox's two, two spare")
}

// TestEveryWorkerHasAComposeService keeps compose.yaml in step with the
// workers registry: each worker runs as its own service there.
func TestEveryWorkerHasAComposeService(t *testing.T) {
	raw, err := os.ReadFile("../../compose.yaml")
	require.NoError(t, err)
	for _, name := range workerNames() {
		want := fmt.Sprintf("command: [\"worker\", %q", name)
		if name == "relay" {
			want = `command: ["relay"` // the relay subcommand, with its own flags
		}
		assert.True(t, strings.Contains(string(raw), want), "compose.yaml has no service running worker %s", name)
	}
}

func TestPoolMax(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		value string
		want  int
		ok    bool
	}{
		{"", 0, true},
		{"1", 1, true},
		{"50", 50, true},
		{"0", 0, false},
		{"-2", 0, false},
		{"twenty", 0, false},
		{strconv.Itoa(domain.MaxMaxConcurrentSessions + 1), 0, false},
	} {
		t.Run(tt.value, func(t *testing.T) {
			got, err := poolMax(tt.value)
			if !tt.ok {
				assert.ErrorContains(t, err, "--pool-max")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
