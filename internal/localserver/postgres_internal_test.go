package localserver

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAClusterInADirectoryClosedToItsUserStarts: run as root, the server
// runs as an unprivileged user, and a data directory under a 0700 parent
// (a clone in /root or in a private home) is closed to that user. The
// cluster then lives where the user can reach it, linked from the data
// directory, and a restart finds it again.
func TestAClusterInADirectoryClosedToItsUserStarts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the server runs as another user only when started by root")
	}
	closed, err := os.MkdirTemp("", "closed-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(closed) })
	require.NoError(t, os.Chmod(closed, 0o700))
	open, err := os.MkdirTemp("", "fallback-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(open) })
	require.NoError(t, os.Chmod(open, 0o755))
	fallbackRoot = filepath.Join(open, "agentbus")
	t.Cleanup(func() { fallbackRoot = "/var/lib/agentbus" })

	port, err := FreePort()
	require.NoError(t, err)
	cfg := PostgresConfig{Dir: filepath.Join(closed, ".agentbus", "postgres"), Port: port, Password: "closed0secret"}
	pg, err := StartPostgres(context.Background(), cfg)
	require.NoError(t, err)
	query := func(pg *Postgres) {
		t.Helper()
		conn, err := pgx.Connect(context.Background(), pg.URL("postgres"))
		require.NoError(t, err)
		defer conn.Close(context.Background())
		_, err = conn.Exec(context.Background(), "CREATE TABLE IF NOT EXISTS kept (n int)")
		require.NoError(t, err)
	}
	query(pg)
	pg.Stop()

	target, err := os.Readlink(cfg.Dir)
	require.NoError(t, err, "the data directory leads to the cluster")
	assert.Equal(t, fallbackRoot, filepath.Dir(target))
	assert.FileExists(t, filepath.Join(target, "PG_VERSION"))

	pg, err = StartPostgres(context.Background(), cfg)
	require.NoError(t, err, "a restart finds the same cluster")
	defer pg.Stop()
	query(pg)
}
