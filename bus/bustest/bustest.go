// Package bustest gives tests a real NATS JetStream server: embedded in the
// test process, on a free loopback port, with its store in a temporary
// directory, and provisioned from the nats/ folder.
package bustest

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
)

// configs remembers how each server was started, so Restart can start it
// again on the same port and store.
var configs sync.Map // *server.Server -> bus.EmbeddedConfig

// Server starts an embedded server with JetStream (fsync on every write, as
// in production), provisions every stream and consumer of the nats/ folder,
// and connects to it. The connection reconnects quickly and forever, so it
// survives Restart. Everything is stopped and removed when the test ends.
func Server(t testing.TB) (*server.Server, jetstream.JetStream, *nats.Conn) {
	t.Helper()
	srv := start(t, bus.EmbeddedConfig{
		StoreDir: t.TempDir(),
		Port:     -1,
		// A fixed cap keeps the streams' size reservations independent of
		// the free space of the machine running the tests.
		MaxStore: 64 << 30,
	})
	nc, js := Connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := bus.Provision(ctx, js); err != nil {
		t.Fatalf("bustest: provision: %v", err)
	}
	return srv, js, nc
}

// Connect opens another connection to srv, closed when the test ends.
func Connect(t testing.TB, srv *server.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, js, err := bus.Connect(ctx, srv.ClientURL(),
		nats.Name("bustest"),
		nats.ReconnectWait(50*time.Millisecond),
		nats.ReconnectJitter(0, 0),
		// Keep what is published during a restart until the server is back.
		nats.ReconnectBufSize(64<<20),
	)
	if err != nil {
		t.Fatalf("bustest: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc, js
}

// Restart shuts srv down and starts a new server on the same port with the
// same store, as a process restart would; connected clients reconnect on
// their own. It returns the new server, which replaces srv.
func Restart(t testing.TB, srv *server.Server) *server.Server {
	t.Helper()
	v, ok := configs.Load(srv)
	if !ok {
		t.Fatalf("bustest: Restart needs a server started by bustest")
	}
	cfg := v.(bus.EmbeddedConfig)
	cfg.Port = srv.Addr().(*net.TCPAddr).Port
	srv.Shutdown()
	srv.WaitForShutdown()
	configs.Delete(srv)
	return start(t, cfg)
}

func start(t testing.TB, cfg bus.EmbeddedConfig) *server.Server {
	t.Helper()
	var (
		srv *server.Server
		err error
	)
	// The port of a server that just stopped can take a moment to free up.
	for attempt := 0; attempt < 50; attempt++ {
		if srv, err = bus.StartEmbedded(cfg); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("bustest: start server: %v", err)
	}
	configs.Store(srv, cfg)
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
		configs.Delete(srv)
	})
	return srv
}

// URL returns the client URL of srv.
func URL(srv *server.Server) string {
	return fmt.Sprintf("nats://%s", srv.Addr().String())
}
