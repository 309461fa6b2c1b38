package bus_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/internal/localserver"
)

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func TestIsUnavailableTellsAnOutageFromAFailure(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addr := closedPort(t)

	_, pgDown := pgx.Connect(ctx, "postgres://u:p@"+addr+"/db?sslmode=disable&connect_timeout=5")
	require.Error(t, pgDown)
	_, dialDown := net.Dial("tcp", addr)
	require.Error(t, dialDown)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
	require.NoError(t, err)
	_, httpDown := http.DefaultClient.Do(req)
	require.Error(t, httpDown)

	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"postgres refusing connections", fmt.Errorf("load session: %w", pgDown), true},
		{"postgres shutting down", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}, true},
		{"postgres starting up", &pgconn.PgError{Code: "57P03", Message: "the database system is starting up"}, true},
		{"a connection refused", dialDown, true},
		{"a connection closed before its reply", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"a request timing out", fmt.Errorf("issue key: %w", context.DeadlineExceeded), true},
		{"NATS without JetStream", fmt.Errorf("publish: %w", nats.ErrNoResponders), true},
		{"NATS timing out", nats.ErrTimeout, true},
		{"a refused row", &pgconn.PgError{Code: "23505", Message: "duplicate key value"}, false},
		{"an ordinary error", errors.New("the session is not running"), false},
		{"a permanent error over an outage", bus.Permanent(pgDown), false},
		{"an HTTP receiver that is down", httpDown, false},
		{"a cancelled context", context.Canceled, false},
		{"no error", nil, false},
	} {
		assert.Equal(t, tt.want, bus.IsUnavailable(tt.err), "%s: %v", tt.name, tt.err)
	}
}

// TestARedisLoadingItsDataIsUnavailable restarts a real Redis that loads
// its data slowly (key-load-delay, a setting Redis's own tests use) and
// reads its answer while it loads: a relay or sidecar writing then is held,
// not failed.
func TestARedisLoadingItsDataIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	port, err := localserver.FreePort()
	require.NoError(t, err)
	start := func() *exec.Cmd {
		cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--appendonly", "yes", "--save", "", "--key-load-delay", "500")
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	first := start()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), MaxRetries: -1})
	defer c.Close()
	require.Eventually(t, func() bool { return c.Ping(ctx).Err() == nil }, 30*time.Second, 20*time.Millisecond, "redis did not start")
	require.NoError(t, c.Eval(ctx, "for i = 1, 20000 do redis.call('SET', 'k' .. i, 'v') end return 1", nil).Err())
	_ = c.ShutdownSave(ctx).Err()
	_ = first.Wait()

	start()
	var loading error
	require.Eventually(t, func() bool {
		err := c.Ping(ctx).Err()
		if redis.IsLoadingError(err) {
			loading = err
			return true
		}
		return false
	}, 30*time.Second, 5*time.Millisecond, "redis never answered LOADING")
	assert.True(t, bus.IsUnavailable(fmt.Errorf("forward: %w", loading)), "%v", loading)
}
