package bus

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Connect connects to the NATS servers at url (a comma-separated list for a
// cluster) and returns the connection and its JetStream context. It waits
// until the first connection is made or ctx ends. Once connected, the client
// reconnects forever: a worker outlives any server restart. Disconnects,
// reconnects and asynchronous errors are logged with slog.Default().
//
// opts are applied after the defaults, so nats.Name("agentbus-relay") or
// nats.ReconnectWait(...) override them. The default connection name is
// "agentbus-<program>", which `nats server report connections` shows.
func Connect(ctx context.Context, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream, error) {
	logger := slog.Default().With("component", "nats")
	defaults := []nats.Option{
		nats.Name("agentbus-" + filepath.Base(os.Args[0])),
		nats.MaxReconnects(-1),
		// A server that is down at start is retried like one lost later.
		nats.RetryOnFailedConnect(true),
		nats.ReconnectWait(500 * time.Millisecond),
		nats.ReconnectJitter(250*time.Millisecond, time.Second),
		// Notice a dead server within seconds rather than minutes.
		nats.PingInterval(10 * time.Second),
		nats.MaxPingsOutstanding(3),
		nats.ConnectHandler(func(nc *nats.Conn) {
			logger.Info("nats connected", "url", nc.ConnectedUrlRedacted(), "server", nc.ConnectedServerName())
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err == nil {
				// Closed on purpose.
				logger.Debug("nats disconnected")
				return
			}
			logger.Warn("nats disconnected", "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			logger.Info("nats reconnected", "url", nc.ConnectedUrlRedacted(), "server", nc.ConnectedServerName())
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			if err := nc.LastError(); err != nil {
				logger.Warn("nats connection closed", "err", err)
				return
			}
			logger.Debug("nats connection closed")
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			logger.Error("nats async error", "subject", subject, "err", err)
		}),
	}
	nc, err := nats.Connect(url, append(defaults, opts...)...)
	if err != nil {
		return nil, nil, fmt.Errorf("bus: connect %s: %w", url, err)
	}
	if err := waitConnected(ctx, nc); err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("bus: connect %s: %w", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("bus: jetstream: %w", err)
	}
	return nc, js, nil
}

// waitConnected waits for the first connection: with RetryOnFailedConnect,
// nats.Connect returns before it is made.
func waitConnected(ctx context.Context, nc *nats.Conn) error {
	if nc.IsConnected() {
		return nil
	}
	ch := nc.StatusChanged(nats.CONNECTED, nats.CLOSED)
	defer nc.RemoveStatusListener(ch)
	for !nc.IsConnected() {
		select {
		case <-ctx.Done():
			if err := nc.LastError(); err != nil {
				return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
			}
			return ctx.Err()
		case st := <-ch:
			if st == nats.CLOSED {
				return nats.ErrConnectionClosed
			}
		case <-time.After(100 * time.Millisecond):
			// The status may have changed before the listener was added.
		}
	}
	return nil
}
