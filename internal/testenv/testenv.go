// Package testenv gives integration tests real servers: one private
// Postgres and one private Redis per test binary, started from the
// machine's binaries on free loopback ports in temporary directories, with
// a fresh database per test. Packages that use it call Main from TestMain
// so the servers stop when the tests end.
package testenv

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/agentbus/agentbus/internal/localserver"
	"github.com/agentbus/agentbus/postgres/migrations"
)

const templateDB = "agentbus_template"

var (
	pgOnce   sync.Once
	pgServer *localserver.Postgres
	pgErr    error

	redisOnce   sync.Once
	redisServer *localserver.Redis
	redisErr    error

	dbCounter atomic.Int64
	tmpDirs   []string
	tmpMu     sync.Mutex
)

// Main runs the tests and then stops the servers they started.
func Main(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		// A benchmark prints its name, then its result when done: an info
		// line in between splits the one from the other.
		slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	}
	code := m.Run()
	if pgServer != nil {
		pgServer.Stop()
	}
	if redisServer != nil {
		redisServer.Stop()
	}
	tmpMu.Lock()
	for _, d := range tmpDirs {
		_ = os.RemoveAll(d)
	}
	tmpMu.Unlock()
	os.Exit(code)
}

// TempDir makes a directory that lives until Main returns. Unlike
// t.TempDir it is world-traversable, so a server running as another user
// can use it.
func TempDir(prefix string) (string, error) {
	dir, err := os.MkdirTemp("", "agentbus-"+prefix+"-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	tmpMu.Lock()
	tmpDirs = append(tmpDirs, dir)
	tmpMu.Unlock()
	return dir, nil
}

func startPostgres() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := TempDir("pg")
	if err != nil {
		pgErr = err
		return
	}
	port, err := localserver.FreePort()
	if err != nil {
		pgErr = err
		return
	}
	// pg_stat_statements lets a benchmark count the statements it made
	// the stack run.
	pgServer, pgErr = localserver.StartPostgres(ctx, localserver.PostgresConfig{Dir: filepath.Join(dir, "data"), Port: port,
		Settings: []string{"shared_preload_libraries=pg_stat_statements"}})
	if pgErr != nil {
		return
	}
	if pgErr = pgServer.CreateDatabase(ctx, templateDB); pgErr != nil {
		return
	}
	_, pgErr = migrations.Apply(ctx, pgServer.URL(templateDB))
}

// PostgresURL returns the URL of a fresh database with every migration
// applied, dropped when the test ends.
func PostgresURL(t testing.TB) string {
	t.Helper()
	pgOnce.Do(startPostgres)
	if pgErr != nil {
		t.Fatalf("postgres: %v", pgErr)
	}
	name := fmt.Sprintf("t%d_%d_%s", os.Getpid(), dbCounter.Add(1), sanitize(t.Name()))
	ctx := context.Background()
	admin, err := pgxpool.New(ctx, pgServer.URL("postgres"))
	if err != nil {
		t.Fatalf("postgres admin: %v", err)
	}
	defer admin.Close()
	if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %q TEMPLATE %s", name, templateDB)); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		admin, err := pgxpool.New(ctx, pgServer.URL("postgres"))
		if err != nil {
			return
		}
		defer admin.Close()
		_, _ = admin.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %q WITH (FORCE)", name))
	})
	return pgServer.URL(name)
}

// Postgres returns a pool on a fresh, migrated database.
func Postgres(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), PostgresURL(t))
	if err != nil {
		t.Fatalf("postgres pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func startRedis() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir, err := TempDir("redis")
	if err != nil {
		redisErr = err
		return
	}
	port, err := localserver.FreePort()
	if err != nil {
		redisErr = err
		return
	}
	redisServer, redisErr = localserver.StartRedis(ctx, localserver.RedisConfig{Dir: dir, Port: port})
}

// RedisURL returns the URL of the shared Redis server. Tests keep apart by
// their keys (session ids are fresh UUIDs).
func RedisURL(t testing.TB) string {
	t.Helper()
	redisOnce.Do(startRedis)
	if redisErr != nil {
		t.Fatalf("redis: %v", redisErr)
	}
	return redisServer.URL()
}

// Redis returns a client of the shared Redis server.
func Redis(t testing.TB) *redis.Client {
	t.Helper()
	return RedisClient(t, RedisURL(t))
}

// PrivateRedis starts a Redis server of the test's own, with its
// append-only file on, for tests that stop, kill or restart it.
func PrivateRedis(t testing.TB) *localserver.Redis {
	t.Helper()
	dir, err := TempDir("redis")
	if err != nil {
		t.Fatal(err)
	}
	port, err := localserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := localserver.StartRedis(context.Background(), localserver.RedisConfig{Dir: dir, Port: port, Durable: true})
	if err != nil {
		t.Fatalf("redis: %v", err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

// PrivatePostgres starts a Postgres server of the test's own, for tests
// that stop, kill or restart it; it is stopped when the test ends. Its
// "postgres" database has no migrations applied. It syncs every commit to
// disk, so what was committed survives a kill.
func PrivatePostgres(t testing.TB) *localserver.Postgres {
	t.Helper()
	dir, err := TempDir("pg")
	if err != nil {
		t.Fatal(err)
	}
	port, err := localserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := localserver.StartPostgres(ctx, localserver.PostgresConfig{Dir: filepath.Join(dir, "data"), Port: port, Durable: true})
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

// RestartPostgres starts old again on its directory and port; old must be
// stopped or killed.
func RestartPostgres(t testing.TB, old *localserver.Postgres) *localserver.Postgres {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := old.Restart(ctx)
	if err != nil {
		t.Fatalf("restart postgres: %v", err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

func sanitize(name string) string {
	name = strings.ToLower(name)
	b := make([]rune, 0, len(name))
	for _, r := range name {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b = append(b, r)
		} else {
			b = append(b, '_')
		}
	}
	if len(b) > 30 {
		b = b[:30]
	}
	return string(b)
}

// RestartRedis starts old again on its directory and port; old must be stopped.
func RestartRedis(t testing.TB, old *localserver.Redis) *localserver.Redis {
	t.Helper()
	srv, err := old.Restart(context.Background())
	if err != nil {
		t.Fatalf("restart redis: %v", err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

// RedisClient returns a client of the server at url, closed when the test ends.
func RedisClient(t testing.TB, url string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("redis url: %v", err)
	}
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	return client
}
