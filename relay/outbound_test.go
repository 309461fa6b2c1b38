package relay_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/relay"
)

// publishCommand publishes a command envelope for a session; msgID is its
// Nats-Msg-Id (the envelope id when empty).
func publishCommand(t *testing.T, js jetstream.JetStream, sessionID string, env bus.Envelope, msgID string) {
	t.Helper()
	body, err := json.Marshal(env)
	require.NoError(t, err)
	m := nats.NewMsg(bus.SidecarCommandSubject(sessionID, env.Type))
	m.Data = body
	if msgID == "" {
		msgID = env.ID
	}
	m.Header.Set(jetstream.MsgIDHeader, msgID)
	_, err = js.PublishMsg(context.Background(), m)
	require.NoError(t, err)
}

func commandEntries(t *testing.T, rdb *redis.Client, sessionID string) []redis.XMessage {
	t.Helper()
	msgs, err := rdb.XRange(context.Background(), relay.CommandsKey(sessionID), "-", "+").Result()
	require.NoError(t, err)
	return msgs
}

func TestOutbound(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	id := uuid.NewString()
	occurred := time.UnixMilli(1_700_000_000_123).UTC()
	pause := bus.Envelope{ID: uuid.NewString(), Type: "pause", Aggregate: "session", AggregateID: id, OccurredAt: occurred}
	steer := bus.Envelope{ID: uuid.NewString(), Type: "steering_message", Aggregate: "session", AggregateID: id, OccurredAt: occurred,
		Data: json.RawMessage(`{"message_id":"m1","content":"hi","priority":"Immediate"}`)}
	resume := bus.Envelope{ID: uuid.NewString(), Type: "resume", Aggregate: "session", AggregateID: id, OccurredAt: occurred}

	// The XADD of this one happened but its ack was lost: the redelivery
	// must not write it again.
	_, err := relay.WriteCommand(ctx, e.rdb, relay.Command{SessionID: id, Type: "pause", ID: pause.ID, Data: json.RawMessage(`{}`), TS: occurred.UnixMilli()}, time.Hour)
	require.NoError(t, err)
	publishCommand(t, e.js, id, pause, "")
	publishCommand(t, e.js, id, steer, "")
	// The same command published again under another message id (so
	// JetStream does not drop it) is written once as well.
	publishCommand(t, e.js, id, steer, uuid.NewString())
	publishCommand(t, e.js, id, resume, "")
	// Not a command: dead-lettered, and the relay goes on.
	bad := nats.NewMsg(bus.SidecarCommandSubject(id, "stop"))
	bad.Data = []byte("not json")
	_, err = e.js.PublishMsg(ctx, bad)
	require.NoError(t, err)

	e.start("relay-a", nil)

	require.Eventually(t, func() bool { return len(commandEntries(t, e.rdb, id)) >= 3 }, wait, 20*time.Millisecond)
	// Nothing more comes: the work queue is empty once every command is acked.
	require.Eventually(t, func() bool {
		s, err := e.js.Stream(ctx, bus.StreamSidecarCommands)
		if err != nil {
			return false
		}
		info, err := s.Info(ctx)
		return err == nil && info.State.Msgs == 0
	}, wait, 20*time.Millisecond)
	entries := commandEntries(t, e.rdb, id)
	require.Len(t, entries, 3)
	assert.Equal(t, map[string]any{"type": "pause", "data": "{}", "ts": "1700000000123", "command_id": pause.ID}, entries[0].Values)
	assert.Equal(t, map[string]any{"type": "steering_message", "data": string(steer.Data), "ts": "1700000000123", "command_id": steer.ID}, entries[1].Values)
	assert.Equal(t, "resume", entries[2].Values["type"])
	assert.Equal(t, resume.ID, entries[2].Values["command_id"])

	dlq, err := e.js.Stream(ctx, bus.StreamDLQ)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		m, err := dlq.GetLastMsgForSubject(ctx, bus.DLQSubject(relay.DefaultOutboundConsumer))
		return err == nil && string(m.Data) == "not json"
	}, wait, 20*time.Millisecond)
}

func TestParseCommand(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	id := uuid.NewString()
	// A work queue takes one consumer per subject: stand in for the relay's.
	require.NoError(t, e.js.DeleteConsumer(ctx, bus.StreamSidecarCommands, relay.DefaultOutboundConsumer))
	cons, err := e.js.CreateOrUpdateConsumer(ctx, bus.StreamSidecarCommands, jetstream.ConsumerConfig{Durable: "parse-test", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	next := func() jetstream.Msg {
		t.Helper()
		m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		require.NoError(t, err)
		require.NoError(t, m.Ack())
		return m
	}
	publish := func(typ, msgID string, body string) {
		m := nats.NewMsg(bus.SidecarCommandSubject(id, typ))
		m.Data = []byte(body)
		if msgID != "" {
			m.Header.Set(jetstream.MsgIDHeader, msgID)
		}
		_, err := e.js.PublishMsg(ctx, m)
		require.NoError(t, err)
	}

	tests := []struct {
		name    string
		typ     string
		msgID   string
		body    string
		wantErr bool
		check   func(t *testing.T, c relay.Command)
	}{
		{name: "envelope", typ: "interrupt", body: `{"id":"8a1f7c1e-58c4-4c55-9d7e-3c1b2a4d5e6f","type":"interrupt","occurredAt":"2024-01-02T03:04:05.006Z","data":{"why":"x"}}`,
			check: func(t *testing.T, c relay.Command) {
				assert.Equal(t, "8a1f7c1e-58c4-4c55-9d7e-3c1b2a4d5e6f", c.ID)
				assert.Equal(t, "interrupt", c.Type)
				assert.JSONEq(t, `{"why":"x"}`, string(c.Data))
				assert.Equal(t, time.Date(2024, 1, 2, 3, 4, 5, 6e6, time.UTC).UnixMilli(), c.TS)
			}},
		{name: "empty body takes the message id", typ: "stop", msgID: "not-a-uuid", body: ``,
			check: func(t *testing.T, c relay.Command) {
				_, err := uuid.Parse(c.ID)
				assert.NoError(t, err, "command ids are UUIDs")
				assert.Equal(t, "{}", string(c.Data))
				assert.Equal(t, id, c.SessionID)
			}},
		{name: "data not an object", typ: "pause", body: `{"id":"x","data":[1]}`, wantErr: true},
		{name: "not JSON", typ: "pause", body: `pause!`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			publish(tt.typ, tt.msgID, tt.body)
			c, err := relay.ParseCommand(next())
			if tt.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			tt.check(t, c)
		})
	}
}

// TestOutboundRedisDown publishes commands while Redis is down: they are
// written, once and in order, when it is back.
func TestOutboundRedisDown(t *testing.T) {
	e := newEnv(t)
	srv := e.privateRedis()
	id := uuid.NewString()
	e.start("relay-a", nil)
	srv.Stop()
	var sent []string
	for range 5 {
		env := bus.Envelope{ID: uuid.NewString(), Type: "steering_message", Aggregate: "session", AggregateID: id,
			OccurredAt: time.Now(), Data: json.RawMessage(`{"content":"hi"}`)}
		publishCommand(t, e.js, id, env, "")
		sent = append(sent, env.ID)
	}
	time.Sleep(500 * time.Millisecond)
	srv = testenv.RestartRedis(t, srv)
	rdb := testenv.RedisClient(t, srv.URL())
	require.Eventually(t, func() bool {
		msgs, err := rdb.XRange(context.Background(), relay.CommandsKey(id), "-", "+").Result()
		return err == nil && len(msgs) >= len(sent)
	}, wait, 20*time.Millisecond)
	entries := commandEntries(t, rdb, id)
	require.Len(t, entries, len(sent))
	for i, m := range entries {
		assert.Equal(t, sent[i], m.Values["command_id"])
	}
}
