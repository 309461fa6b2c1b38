package localserver_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/localserver"
	"github.com/agentbus/agentbus/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// connects reports whether url logs into Postgres.
func connects(t *testing.T, url string) error {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err == nil {
		_ = conn.Close(context.Background())
	}
	return err
}

// TestPostgresTakesOnlyItsPassword: a cluster requires the password of its
// config, also one an earlier version created trusting every connection.
func TestPostgresTakesOnlyItsPassword(t *testing.T) {
	ctx := context.Background()
	dir, err := testenv.TempDir("pg-auth")
	require.NoError(t, err)
	port, err := localserver.FreePort()
	require.NoError(t, err)
	cfg := localserver.PostgresConfig{Dir: filepath.Join(dir, "data"), Port: port, Password: "first0secret"}
	pg, err := localserver.StartPostgres(ctx, cfg)
	require.NoError(t, err)
	require.NoError(t, connects(t, pg.URL("postgres")))
	for _, password := range []string{"", "postgres", "wrong"} {
		url := fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/postgres?sslmode=disable", password, port)
		assert.ErrorContains(t, connects(t, url), "password authentication failed", "password %q", password)
	}
	pg.Stop()

	// As a cluster of an earlier version was: every connection trusted.
	require.NoError(t, os.WriteFile(filepath.Join(cfg.Dir, "pg_hba.conf"), []byte("host all all 127.0.0.1/32 trust\n"), 0o600))
	require.NoError(t, os.Remove(filepath.Join(cfg.Dir, "agentbus-password.sha256")))
	cfg.Password = "second0secret"
	pg, err = localserver.StartPostgres(ctx, cfg)
	require.NoError(t, err)
	defer pg.Stop()
	require.NoError(t, connects(t, pg.URL("postgres")), "the new password logs in")
	for _, password := range []string{"", "first0secret"} {
		url := fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/postgres?sslmode=disable", password, port)
		assert.ErrorContains(t, connects(t, url), "password authentication failed", "password %q", password)
	}
}

// TestRedisWithAPasswordHasNoDefaultUser: its users survive a restart.
func TestRedisWithAPasswordHasNoDefaultUser(t *testing.T) {
	ctx := context.Background()
	dir, err := testenv.TempDir("redis-auth")
	require.NoError(t, err)
	port, err := localserver.FreePort()
	require.NoError(t, err)
	users := []localserver.RedisUser{{Name: "agentbus", Password: "s3cret", Rules: "~* &* +@all"},
		{Name: "reader", Password: "r3ader", Rules: "~* -@all +@connection +@read"}}
	srv, err := localserver.StartRedis(ctx, localserver.RedisConfig{Dir: dir, Port: port, Durable: true, Users: users})
	require.NoError(t, err)
	check := func() {
		opts, err := redis.ParseURL(srv.URL())
		require.NoError(t, err)
		ok := redis.NewClient(opts)
		defer ok.Close()
		require.NoError(t, ok.Ping(ctx).Err())
		require.NoError(t, ok.Set(ctx, "k", "v", 0).Err())
		readerOpts, err := redis.ParseURL(srv.UserURL(users[1]))
		require.NoError(t, err)
		reader := redis.NewClient(readerOpts)
		defer reader.Close()
		require.NoError(t, reader.Get(ctx, "k").Err(), "a user reads what its rules allow")
		assert.ErrorContains(t, reader.Set(ctx, "k", "w", 0).Err(), "NOPERM", "and nothing more")
		for _, o := range []*redis.Options{
			{Addr: fmt.Sprintf("127.0.0.1:%d", port)},
			{Addr: fmt.Sprintf("127.0.0.1:%d", port), Username: "default"},
			{Addr: fmt.Sprintf("127.0.0.1:%d", port), Username: "agentbus", Password: "wrong"},
			{Addr: fmt.Sprintf("127.0.0.1:%d", port), Username: "reader", Password: "s3cret"},
		} {
			c := redis.NewClient(o)
			assert.Error(t, c.Ping(ctx).Err(), "user %q password %q", o.Username, o.Password)
			_ = c.Close()
		}
	}
	check()
	srv.Stop()
	srv, err = srv.Restart(ctx)
	require.NoError(t, err)
	defer srv.Stop()
	check()
}

// TestRedisWithUsersKeepsWhatScriptsWroteAcrossARestart: a script's writes
// reach the append-only file as a transaction, which Redis replays on its
// next start; every one of them is there after a restart.
func TestRedisWithUsersKeepsWhatScriptsWroteAcrossARestart(t *testing.T) {
	ctx := context.Background()
	dir, err := testenv.TempDir("redis-aof")
	require.NoError(t, err)
	port, err := localserver.FreePort()
	require.NoError(t, err)
	users := []localserver.RedisUser{{Name: "agentbus", Password: "s3cret", Rules: "~* &* +@all"}}
	srv, err := localserver.StartRedis(ctx, localserver.RedisConfig{Dir: dir, Port: port, Durable: true, Users: users})
	require.NoError(t, err)
	client := func() *redis.Client {
		opts, err := redis.ParseURL(srv.URL())
		require.NoError(t, err)
		return redis.NewClient(opts)
	}
	c := client()
	require.NoError(t, c.Eval(ctx, `redis.call('SET', KEYS[2], '1'); return redis.call('XADD', KEYS[1], '*', 'type', 'steering_message')`,
		[]string{"stream", "written"}).Err())
	require.NoError(t, c.Set(ctx, "plain", "1", 0).Err())
	c.Close()
	srv.Stop()
	srv, err = srv.Restart(ctx)
	require.NoError(t, err)
	defer srv.Stop()
	c = client()
	defer c.Close()
	assert.Equal(t, int64(1), c.Exists(ctx, "plain").Val())
	assert.Equal(t, int64(1), c.XLen(ctx, "stream").Val(), "the script's entry survived the restart")
	assert.Equal(t, int64(1), c.Exists(ctx, "written").Val(), "and the rest of its transaction")
}
