package bus_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
)

func newPublisher(t testing.TB, js jetstream.JetStream) *bus.Publisher {
	t.Helper()
	p, err := bus.NewPublisher(js, bus.PublisherConfig{})
	require.NoError(t, err)
	return p
}

func envelope(t testing.TB, id string) bus.Envelope {
	t.Helper()
	return bus.Envelope{ID: id, Type: "session_paused", Aggregate: "session", AggregateID: "s1", Version: 1, OwnerID: "u1",
		OccurredAt: time.Now().UTC(), Data: []byte(`{}`)}
}

// eventMsgs builds n event messages with ids <prefix>-<i> on subjects spread
// over sessions sessions.
func eventMsgs(t testing.TB, prefix string, n, sessions int) []*nats.Msg {
	t.Helper()
	msgs := make([]*nats.Msg, n)
	for i := range msgs {
		env := envelope(t, fmt.Sprintf("%s-%d", prefix, i))
		env.AggregateID = fmt.Sprintf("s%d", i%sessions)
		env.Version = int64(i)
		m, err := bus.NewMsg(context.Background(), bus.EventSubject("session", env.AggregateID, "message_enqueued"), env)
		require.NoError(t, err)
		msgs[i] = m
	}
	return msgs
}

func streamMsgs(t testing.TB, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), stream)
	require.NoError(t, err)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	return info.State.Msgs
}

func TestPublishDropsDuplicates(t *testing.T) {
	t.Parallel()
	_, js, _ := bustest.Server(t)
	ctx := context.Background()
	pub := newPublisher(t, js)
	env := envelope(t, "dup-1")
	subject := bus.EventSubject("session", "s1", "session_paused")

	first, err := pub.Publish(ctx, subject, env)
	require.NoError(t, err)
	assert.False(t, first.Duplicate)
	second, err := pub.Publish(ctx, subject, env)
	require.NoError(t, err)
	assert.True(t, second.Duplicate, "same Nats-Msg-Id is dropped")
	assert.Equal(t, first.Sequence, second.Sequence)
	assert.EqualValues(t, 1, streamMsgs(t, js, bus.StreamEvents))

	s, err := js.Stream(ctx, bus.StreamEvents)
	require.NoError(t, err)
	raw, err := s.GetMsg(ctx, first.Sequence)
	require.NoError(t, err)
	assert.Equal(t, "dup-1", raw.Header.Get("Nats-Msg-Id"))
	assert.Equal(t, "session_paused", raw.Header.Get("Agents-Type"))
}

func TestPublishMsgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// before is published first, msgs second; want is the stream's count.
		before func(t testing.TB) []*nats.Msg
		msgs   func(t testing.TB) []*nats.Msg
		want   uint64
		atomic bool
		// refused: the server refused a batch, which was then published
		// message by message.
		refused   bool
		configure func(*bus.PublisherConfig)
	}{
		{
			name:   "one atomic batch",
			msgs:   func(t testing.TB) []*nats.Msg { return eventMsgs(t, "a", 50, 3) },
			want:   50,
			atomic: true,
		},
		{
			name:      "split into several batches",
			msgs:      func(t testing.TB) []*nats.Msg { return eventMsgs(t, "a", 250, 3) },
			want:      250,
			atomic:    true,
			configure: func(c *bus.PublisherConfig) { c.MaxBatch = 100 },
		},
		{
			name:    "resend after a partial publish stores each message once",
			before:  func(t testing.TB) []*nats.Msg { return eventMsgs(t, "a", 40, 3)[10:20] },
			msgs:    func(t testing.TB) []*nats.Msg { return eventMsgs(t, "a", 40, 3) },
			want:    40,
			refused: true,
		},
		{
			name: "a duplicate inside the batch",
			msgs: func(t testing.TB) []*nats.Msg {
				m := eventMsgs(t, "a", 40, 1)
				return append(m, m[3])
			},
			want:    40,
			refused: true,
		},
		{
			name:      "without batches",
			msgs:      func(t testing.TB) []*nats.Msg { return eventMsgs(t, "a", 600, 3) },
			want:      600,
			configure: func(c *bus.PublisherConfig) { c.DisableBatch = true; c.MaxInFlight = 16 },
		},
		{
			name: "a short run is published one by one",
			msgs: func(t testing.TB) []*nats.Msg { return eventMsgs(t, "a", 31, 3) },
			want: 31,
		},
		{
			name:      "a short batch when asked for",
			msgs:      func(t testing.TB) []*nats.Msg { return eventMsgs(t, "a", 2, 1) },
			want:      2,
			atomic:    true,
			configure: func(c *bus.PublisherConfig) { c.MinBatch = 2 },
		},
		{
			name: "a single message",
			msgs: func(t testing.TB) []*nats.Msg { return eventMsgs(t, "a", 1, 1) },
			want: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, js, _ := bustest.Server(t)
			ctx := context.Background()
			var log bytes.Buffer
			cfg := bus.PublisherConfig{Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))}
			if tt.configure != nil {
				tt.configure(&cfg)
			}
			pub, err := bus.NewPublisher(js, cfg)
			require.NoError(t, err)
			if tt.before != nil {
				require.NoError(t, pub.PublishMsgs(ctx, tt.before(t)))
			}
			msgs := tt.msgs(t)
			require.NoError(t, pub.PublishMsgs(ctx, msgs))
			assert.Equal(t, tt.want, streamMsgs(t, js, bus.StreamEvents))
			assert.Equal(t, tt.refused, strings.Contains(log.String(), "batch refused"), log.String())

			s, err := js.Stream(ctx, bus.StreamEvents)
			require.NoError(t, err)
			last, err := s.GetLastMsgForSubject(ctx, msgs[len(msgs)-1].Subject)
			require.NoError(t, err)
			if tt.atomic {
				assert.NotEmpty(t, last.Header.Get("Nats-Batch-Id"), "stored by an atomic batch")
			} else {
				assert.Empty(t, last.Header.Get("Nats-Batch-Id"), "stored by single publishes")
			}
			for _, m := range msgs {
				assert.Empty(t, m.Header.Get("Nats-Batch-Id"), "the caller's messages are left alone")
				assert.Empty(t, m.Reply)
			}
		})
	}
}

func TestPublishMsgsKeepsOrderAcrossStreams(t *testing.T) {
	t.Parallel()
	_, js, _ := bustest.Server(t)
	ctx := context.Background()
	pub := newPublisher(t, js)

	var msgs []*nats.Msg
	for i := range 30 {
		subject := bus.EventSubject("session", "s1", "e")
		if i%10 >= 5 {
			subject = bus.CommandSubject("session", "c")
		}
		m := nats.NewMsg(subject)
		m.Header.Set("Nats-Msg-Id", fmt.Sprint(i))
		m.Data = []byte(fmt.Sprint(i))
		msgs = append(msgs, m)
	}
	require.NoError(t, pub.PublishMsgs(ctx, msgs))

	for stream, wantFirst := range map[string]int{bus.StreamEvents: 0, bus.StreamCommands: 5} {
		s, err := js.Stream(ctx, stream)
		require.NoError(t, err)
		info, err := s.Info(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 15, info.State.Msgs, stream)
		prev := -1
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
			raw, err := s.GetMsg(ctx, seq)
			require.NoError(t, err)
			var n int
			_, err = fmt.Sscan(string(raw.Data), &n)
			require.NoError(t, err)
			if prev == -1 {
				assert.Equal(t, wantFirst, n, stream)
			}
			assert.Greater(t, n, prev, "%s keeps publish order", stream)
			prev = n
		}
	}
}

func TestPublishMsgsUnknownSubject(t *testing.T) {
	t.Parallel()
	_, js, _ := bustest.Server(t)
	pub := newPublisher(t, js)
	m := nats.NewMsg("nowhere.at.all")
	m.Header.Set("Nats-Msg-Id", "x")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	assert.Error(t, pub.PublishMsgs(ctx, []*nats.Msg{m, m}), "no stream stores it")
}
