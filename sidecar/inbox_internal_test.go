package sidecar

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// TestInboxTakesUpWhatWasNotAnswered: a predecessor took a message and a
// stop; the next sidecar takes up what has no answer in the event stream,
// and after the session's end (a retry runs it again) only the message.
func TestInboxTakesUpWhatWasNotAnswered(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	xadd := func(key, typ, commandID string, data any) redis.XMessage {
		t.Helper()
		values, err := protocol.Values(typ, data, time.Now())
		if commandID != "" {
			values, err = protocol.CommandValues(typ, commandID, data, time.Now())
		}
		require.NoError(t, err)
		id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: values}).Result()
		require.NoError(t, err)
		msgs, err := rdb.XRange(ctx, key, id, id).Result()
		require.NoError(t, err)
		return msgs[0]
	}
	taken := func(session string) []string {
		t.Helper()
		left, err := newInbox(rdb, session, slog.Default()).load(ctx, protocol.EventsKey(session))
		require.NoError(t, err)
		var types []string
		for _, m := range left {
			types = append(types, m.Values[protocol.FieldType].(string))
		}
		return types
	}
	predecessor := func() (session, stopID string) {
		session, stopID = uuid.NewString(), uuid.NewString()
		b := newInbox(rdb, session, slog.Default())
		b.take(xadd(protocol.CommandsKey(session), protocol.CommandSteeringMessage, uuid.NewString(),
			protocol.SteeringMessage{MessageID: uuid.NewString(), Content: "Go on", Priority: protocol.PriorityQueued}))
		b.take(xadd(protocol.CommandsKey(session), protocol.CommandStop, stopID, protocol.Stop{}))
		b.take(xadd(protocol.CommandsKey(session), protocol.CommandResume, uuid.NewString(), protocol.Resume{}))
		return session, stopID
	}

	session, _ := predecessor()
	assert.Equal(t, []string{protocol.CommandSteeringMessage, protocol.CommandStop}, taken(session),
		"both, in order; a resume is answered as it is handled")
	assert.Equal(t, []string{protocol.CommandSteeringMessage, protocol.CommandStop}, taken(session),
		"still both: only an answer settles them")

	session, stopID := predecessor()
	xadd(protocol.EventsKey(session), protocol.EventStopAck, "", protocol.StopAck{CommandID: stopID})
	assert.Equal(t, []string{protocol.CommandSteeringMessage}, taken(session), "the stop was acknowledged before the predecessor died")

	session, _ = predecessor()
	xadd(protocol.EventsKey(session), protocol.EventSessionEnd, "", protocol.SessionEnd{Status: protocol.StatusError, Reason: protocol.ReasonInfrastructureError})
	assert.Equal(t, []string{protocol.CommandSteeringMessage}, taken(session), "the stop ended with its run; the message is still for the agent")
}
