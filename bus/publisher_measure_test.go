package bus

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockedBuffer is a bytes.Buffer safe for a logger and a test to share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.b.String()
	l.b.Reset()
	return s
}

// TestPublishMsgsMeasureBatch checks that with MeasureBatch a run goes the
// way measured to be cheaper: as one batch when single publishes cost more,
// one by one when a batch does. The stream refuses atomic batches, so a run
// sent as a batch shows as a refusal in the log (and is then stored one by
// one all the same).
func TestPublishMsgsMeasureBatch(t *testing.T) {
	ctx := context.Background()
	srv, err := StartEmbedded(EmbeddedConfig{StoreDir: t.TempDir(), Port: -1, MaxStore: 1 << 30})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	nc, js, err := Connect(ctx, srv.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "MEASURED", Subjects: []string{"measured.>"}})
	require.NoError(t, err)
	defs, err := LoadDefinitions(fstest.MapFS{"streams/MEASURED.json": {Data: []byte(`{"name":"MEASURED","subjects":["measured.>"]}`)}})
	require.NoError(t, err)

	var log lockedBuffer
	pub, err := NewPublisher(js, PublisherConfig{
		MeasureBatch: true,
		Definitions:  defs,
		Logger:       slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	require.NoError(t, err)

	sent := 0
	publish := func(n int) {
		msgs := make([]*nats.Msg, n)
		for i := range msgs {
			sent++
			msgs[i] = nats.NewMsg(fmt.Sprintf("measured.%d", sent))
			msgs[i].Header.Set(jetstream.MsgIDHeader, fmt.Sprint(sent))
		}
		require.NoError(t, pub.PublishMsgs(ctx, msgs))
		info, err := stream.Info(ctx)
		require.NoError(t, err)
		require.Equal(t, uint64(sent), info.State.Msgs, "every message stored")
	}
	refused := func() bool { return strings.Contains(log.take(), "batch refused") }

	// Single publishes measured slow, batches cheap: four go as a batch.
	for range 50 {
		pub.costs.observe(10, false, 50*time.Millisecond)
		pub.costs.observe(10, true, 6*time.Millisecond)
	}
	publish(4)
	assert.True(t, refused(), "four messages go as one batch when single publishes cost more")

	// Batches measured slow against single publishes: eight go one by one,
	// a hundred as a batch.
	for range 50 {
		pub.costs.observe(4, false, 4*time.Millisecond)
		pub.costs.observe(10, true, 20*time.Millisecond)
	}
	publish(8)
	assert.False(t, refused(), "eight messages go one by one when a batch costs more")
	publish(100)
	assert.True(t, refused(), "a hundred messages go as one batch")
}
