package bus_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
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
