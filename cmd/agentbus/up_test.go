package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/localserver"
	"github.com/agentbus/agentbus/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func freePort(t *testing.T) int {
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
	pgPort := freePort(t)
	args := []string{"--data-dir", dataDir, "--http", httpAddr,
		"--nats-port", fmt.Sprint(freePort(t)), "--nats-monitor-port", "0",
		"--postgres-port", fmt.Sprint(pgPort), "--redis-port", fmt.Sprint(freePort(t)),
		"--database-url", "", "--redis-url", "", "--nats-url", ""}
	dbURL := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/agentbus?sslmode=disable", pgPort)

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
	conn, err = pgx.Connect(context.Background(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var n int
	require.NoError(t, conn.QueryRow(context.Background(), "SELECT count(*) FROM processed_messages WHERE consumer = 'up-test'").Scan(&n))
	assert.Equal(t, 1, n, "data survives a restart of up")
	_, err = os.Stat(dataDir + "/nats")
	assert.NoError(t, err)
}
