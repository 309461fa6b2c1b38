package bus

import (
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
)

// IsUnavailable reports whether err says a server the handler depends on
// could not be reached, is restarting, or dropped the connection: the same
// message is expected to go through once the server is back, so Run holds
// it and runs the handler again in place instead of spending one of its
// attempts (see Handler).
//
// It recognises, by their types:
//   - Postgres: a failed connection, an error of class 08 (connection
//     exception) or 57P (shut down, starting up, restarted), a request
//     pgx says never reached the server, a timeout;
//   - NATS: no responders (JetStream restarting), a timeout, a connection
//     that is reconnecting or has no server, no reply from the stream;
//   - Redis: a server still loading its data after a restart (LOADING);
//   - the network under any client (Redis's too): a refused, reset or
//     timed out connection, and one closed before its reply.
//
// A Permanent error is never unavailable, and neither is a failed HTTP
// request: its receiver is outside the deployment, and its retries are
// the schedule's.
func IsUnavailable(err error) bool {
	if err == nil || IsPermanent(err) {
		return false
	}
	var request *url.Error
	if errors.As(err, &request) {
		return false
	}
	return postgresUnavailable(err) || natsUnavailable(err) || redis.IsLoadingError(err) || networkUnavailable(err)
}

func postgresUnavailable(err error) bool {
	var connect *pgconn.ConnectError
	if errors.As(err, &connect) {
		return true
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return strings.HasPrefix(pg.Code, "08") || strings.HasPrefix(pg.Code, "57P")
	}
	return pgconn.SafeToRetry(err) || pgconn.Timeout(err)
}

func natsUnavailable(err error) bool {
	for _, e := range []error{nats.ErrNoResponders, nats.ErrTimeout, nats.ErrConnectionReconnecting,
		nats.ErrDisconnected, nats.ErrNoServers, jetstream.ErrNoStreamResponse, jetstream.ErrServerShutdown} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func networkUnavailable(err error) bool {
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	for _, e := range []error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EPIPE, io.EOF, io.ErrUnexpectedEOF} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// The pauses between the in-place runs of a handler whose servers are
// unavailable: short at first, so a brief outage costs little, then
// capped, so a long one does not flood the servers once they are back.
const (
	firstOutageWait = 250 * time.Millisecond
	maxOutageWait   = 5 * time.Second
)

// nextOutageWait is the pause after the one before (zero at first).
func nextOutageWait(before time.Duration) time.Duration {
	return min(max(2*before, firstOutageWait), maxOutageWait)
}
