package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
)

const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestNewMsg(t *testing.T) {
	t.Parallel()
	env := bus.Envelope{
		ID: "6f1c", Type: "session_paused", Aggregate: "session", AggregateID: "0b5e",
		Version: 7, OwnerID: "u1", OccurredAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		Data: json.RawMessage(`{"reason":"user"}`),
	}

	m, err := bus.NewMsg(bus.WithTraceparent(context.Background(), traceparent), "agents.evt.session.0b5e.session_paused", env)
	require.NoError(t, err)
	assert.Equal(t, "6f1c", m.Header.Get("Nats-Msg-Id"))
	assert.Equal(t, "session_paused", m.Header.Get("Agents-Type"))
	assert.Equal(t, traceparent, m.Header.Get("traceparent"))

	var fields map[string]any
	require.NoError(t, json.Unmarshal(m.Data, &fields))
	assert.Equal(t, map[string]any{
		"id": "6f1c", "type": "session_paused", "aggregate": "session", "aggregateId": "0b5e",
		"version": float64(7), "ownerId": "u1", "occurredAt": "2025-01-02T03:04:05Z",
		"data": map[string]any{"reason": "user"},
	}, fields)

	back, err := bus.DecodeEnvelope(m.Data)
	require.NoError(t, err)
	assert.Equal(t, env, back)
}

func TestNewMsgDefaults(t *testing.T) {
	t.Parallel()
	m, err := bus.NewMsg(context.Background(), "agents.cmd.session.pause", bus.Envelope{ID: "1", Type: "pause"})
	require.NoError(t, err)
	assert.Empty(t, m.Header.Get("traceparent"), "no traceparent in the context")
	env, err := bus.DecodeEnvelope(m.Data)
	require.NoError(t, err)
	assert.JSONEq(t, `{}`, string(env.Data))
	assert.False(t, env.OccurredAt.IsZero())
}

func TestNewMsgRejects(t *testing.T) {
	t.Parallel()
	tests := map[string]bus.Envelope{
		"no id":         {Type: "pause"},
		"no type":       {ID: "1"},
		"data not JSON": {ID: "1", Type: "pause", Data: json.RawMessage(`{`)},
	}
	for name, env := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := bus.NewMsg(context.Background(), "agents.cmd.session.pause", env)
			assert.True(t, errors.Is(err, bus.ErrInvalidEnvelope), "got %v", err)
		})
	}
}

func TestNewEnvelope(t *testing.T) {
	t.Parallel()
	env, err := bus.NewEnvelope("session_paused", "session", "0b5e", 3, "u1", map[string]string{"k": "v"})
	require.NoError(t, err)
	assert.Len(t, env.ID, 36)
	assert.JSONEq(t, `{"k":"v"}`, string(env.Data))
	require.NoError(t, env.Validate())
}

func TestWithTraceparent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want string
	}{
		{traceparent, traceparent},
		{"", ""},
		{"garbage", ""},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nX: y", ""},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", ""},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			assert.Equal(t, tt.want, bus.Traceparent(bus.WithTraceparent(context.Background(), tt.in)))
		})
	}
}

func TestPermanent(t *testing.T) {
	t.Parallel()
	base := errors.New("malformed")
	err := fmt.Errorf("handling: %w", bus.Permanent(base))
	assert.True(t, bus.IsPermanent(err))
	assert.ErrorIs(t, err, base)
	var p *bus.PermanentError
	require.ErrorAs(t, err, &p)
	assert.Equal(t, base, p.Err)
	assert.False(t, bus.IsPermanent(base))
	assert.NoError(t, bus.Permanent(nil))
}
