package bus_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
)

func TestStartEmbedded(t *testing.T) {
	t.Parallel()
	srv, err := bus.StartEmbedded(bus.EmbeddedConfig{StoreDir: t.TempDir(), Port: -1})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)

	js := srv.JetStreamConfig()
	require.NotNil(t, js)
	assert.True(t, js.SyncAlways, "fsync before acknowledging")
	assert.Equal(t, "127.0.0.1", srv.Addr().(*net.TCPAddr).IP.String())
	assert.Equal(t, "agentbus", srv.Name())
}

func TestStartEmbeddedRejects(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { taken.Close() })

	tests := map[string]bus.EmbeddedConfig{
		"no store dir":      {Port: -1},
		"port out of range": {StoreDir: t.TempDir(), Port: 70000},
		"port taken":        {StoreDir: t.TempDir(), Port: taken.Addr().(*net.TCPAddr).Port},
	}
	for name, cfg := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv, err := bus.StartEmbedded(cfg)
			if srv != nil {
				srv.Shutdown()
			}
			assert.Error(t, err)
		})
	}
}

func TestRunReturnsWhenConnectionClosed(t *testing.T) {
	t.Parallel()
	srv, _, _ := bustest.Server(t)
	nc, js := bustest.Connect(t, srv)
	run := start(t, js, runnerConfig(t, "closing", func(context.Context, jetstream.Msg) error { return nil }))
	require.Eventually(t, func() bool {
		c, err := js.Consumer(context.Background(), bus.StreamEvents, "closing")
		return err == nil && c.CachedInfo().NumWaiting > 0
	}, waitFor, 10*time.Millisecond)

	nc.Close()
	require.Eventually(t, run.returned, waitFor, 10*time.Millisecond)
	assert.Error(t, run.err)
}
