// Package bustest gives tests a real NATS JetStream server: embedded in the
// test process, on a free loopback port, with its store in a temporary
// directory, and provisioned from the nats/ folder.
package bustest

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
)

// instance is one test's server across restarts.
type instance struct {
	mu  sync.Mutex
	cfg bus.EmbeddedConfig
	srv *server.Server
}

// instances maps every running server to its instance, for Restart.
var instances sync.Map // *server.Server -> *instance

// Server starts an embedded server with JetStream (fsync on every write, as
// in production), provisions every stream and consumer of the nats/ folder,
// and connects to it. The connection reconnects quickly and forever, so it
// survives Restart. Everything is stopped and removed when the test ends.
func Server(t testing.TB) (*server.Server, jetstream.JetStream, *nats.Conn) {
	t.Helper()
	return ServerWith(t, nil)
}

// ServerWith is Server with the configuration changed by configure first
// (nil changes nothing).
func ServerWith(t testing.TB, configure func(*bus.EmbeddedConfig)) (*server.Server, jetstream.JetStream, *nats.Conn) {
	t.Helper()
	inst := &instance{cfg: bus.EmbeddedConfig{
		StoreDir: t.TempDir(),
		Port:     -1,
		// A fixed cap keeps the streams' size reservations independent of
		// the free space of the machine running the tests.
		MaxStore: 64 << 30,
	}}
	if configure != nil {
		configure(&inst.cfg)
	}
	srv := inst.start(t)
	// Registered before any connection's cleanup, so it runs after them,
	// whichever server is current by then.
	t.Cleanup(inst.shutdown)

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
	v, ok := instances.Load(srv)
	if !ok {
		t.Fatalf("bustest: Restart needs a running server started by Server")
	}
	inst := v.(*instance)
	inst.cfg.Port = srv.Addr().(*net.TCPAddr).Port
	inst.shutdown()
	return inst.start(t)
}

func (inst *instance) start(t testing.TB) *server.Server {
	t.Helper()
	var (
		srv *server.Server
		err error
	)
	// The port of a server that just stopped can take a moment to free up.
	for range 50 {
		if srv, err = bus.StartEmbedded(inst.cfg); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("bustest: start server: %v", err)
	}
	inst.mu.Lock()
	inst.srv = srv
	inst.mu.Unlock()
	instances.Store(srv, inst)
	return srv
}

func (inst *instance) shutdown() {
	inst.mu.Lock()
	srv := inst.srv
	inst.srv = nil
	inst.mu.Unlock()
	if srv == nil {
		return
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	instances.Delete(srv)
}

// CaughtUp is a condition for require.Eventually: the durable consumer
// has been handed every message of stream that its filter takes, and none
// is pending or waiting for its ack. Zero pending alone is not enough: a
// consumer counts a message as pending a moment after its publish is
// acknowledged.
func CaughtUp(js jetstream.JetStream, stream, consumer string) func() bool {
	return func() bool {
		ctx := context.Background()
		c, err := js.Consumer(ctx, stream, consumer)
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		if err != nil || info.NumPending != 0 || info.NumAckPending != 0 {
			return false
		}
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return false
		}
		filters := info.Config.FilterSubjects
		if info.Config.FilterSubject != "" {
			filters = append(filters, info.Config.FilterSubject)
		}
		if len(filters) == 0 {
			filters = []string{">"}
		}
		for _, f := range filters {
			last, err := s.GetLastMsgForSubject(ctx, f)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue
			}
			if err != nil || info.Delivered.Stream < last.Sequence {
				return false
			}
		}
		return true
	}
}
