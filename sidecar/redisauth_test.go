package sidecar_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/sidecar"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// A Redis restarted without the session's ACL user refuses the sidecar's
// credentials until the launcher restores the user: a sidecar starting in
// that window waits for it and runs its session, rather than ending it
// with an infrastructure error.
func TestSidecarStartingWhileRedisLostItsUserWaitsForTheUser(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	user, password := "sidecar-test-"+h.id, uuid.NewString()
	t.Cleanup(func() { h.rdb.Do(context.Background(), "ACL", "DELUSER", user) })
	opts := *h.rdb.Options()
	opts.Username, opts.Password = user, password
	as := redis.NewClient(&opts)
	t.Cleanup(func() { _ = as.Close() })

	cfg := scriptConfig(t, "default")
	done := make(chan struct{})
	h.done = done
	go func() {
		defer close(done)
		h.end, h.err = sidecar.Run(ctx, sidecar.Options{SessionID: h.id, Config: cfg, Redis: as, CommandBlock: 100 * time.Millisecond})
	}()
	t.Cleanup(func() {
		select {
		case <-done:
		case <-time.After(wait):
			t.Errorf("sidecar of session %s did not end", h.id)
		}
	})

	// Redis refused the sidecar (its ACL log says so) before the user is
	// restored, as the launcher does.
	require.Eventually(t, func() bool { return refused(t, h.rdb, user, "auth") }, wait, 20*time.Millisecond, "Redis refused the sidecar")
	require.NoError(t, h.rdb.Do(ctx, "ACL", "SETUSER", user, "reset", "on", ">"+password,
		"~"+protocol.EventsKey(h.id), "~"+protocol.EventsKey(h.id)+":*", "+@all").Err())

	first := h.waitFor("the first event", func(protocol.Entry) bool { return true })
	assert.Equal(t, protocol.EventSessionStarted, first.Type, "the session started: %s", h.dump())
	assert.Equal(t, protocol.ReasonCompleted, h.waitEnd().Reason)
}

// refused reports whether Redis's ACL log holds a refusal of user for
// reason ("auth": its login, "key": a key it may not touch).
func refused(t *testing.T, rdb *redis.Client, user, reason string) bool {
	entries, err := rdb.Do(context.Background(), "ACL", "LOG").Slice()
	require.NoError(t, err)
	for _, e := range entries {
		if entryNames(e, user, reason) {
			return true
		}
	}
	return false
}

// entryNames reports whether an ACL LOG entry (RESP2 list or RESP3 map) is
// a refusal of user for reason.
func entryNames(e any, user, reason string) bool {
	fields := map[string]string{}
	switch v := e.(type) {
	case []any:
		for i := 0; i+1 < len(v); i += 2 {
			k, _ := v[i].(string)
			s, _ := v[i+1].(string)
			fields[k] = s
		}
	case map[any]any:
		for k, val := range v {
			ks, _ := k.(string)
			s, _ := val.(string)
			fields[ks] = s
		}
	}
	return fields["reason"] == reason && strings.EqualFold(fields["username"], user)
}

// A restarted sidecar whose read of the commands its predecessor took
// fails (here Redis refuses it the inbox's key until its user is set
// again) reads it again, and the message the predecessor took reaches the
// agent rather than stay pending for good.
func TestRestartedSidecarRetriesReadingWhatItsPredecessorTook(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	user, password := "sidecar-test-"+h.id, uuid.NewString()
	t.Cleanup(func() { h.rdb.Do(context.Background(), "ACL", "DELUSER", user) })
	// The predecessor took a steering message and died before the agent
	// had it.
	fields := map[string]string{"type": protocol.CommandSteeringMessage, "command_id": uuid.NewString(), "ts": "1",
		"data": `{"message_id":"m-left","content":"Go on","priority":"Queued"}`}
	inbox, err := json.Marshal([]map[string]any{{"id": "1-0", "fields": fields, "answer": protocol.EventMessageDelivered + ":m-left"}})
	require.NoError(t, err)
	require.NoError(t, h.rdb.Set(ctx, protocol.InboxKey(h.id), inbox, 0).Err())
	// Every key of the session but the inbox.
	require.NoError(t, h.rdb.Do(ctx, "ACL", "SETUSER", user, "reset", "on", ">"+password, "~"+protocol.EventsKey(h.id),
		"~"+protocol.CursorKey(h.id), "~"+protocol.CommandsKey(h.id), "~"+protocol.EngineKey(h.id), "+@all").Err())
	opts := *h.rdb.Options()
	opts.Username, opts.Password = user, password
	as := redis.NewClient(&opts)
	t.Cleanup(func() { _ = as.Close() })

	cfg := scriptConfig(t, "default")
	cfg.StayIdle = true
	done := make(chan struct{})
	h.done = done
	go func() {
		defer close(done)
		h.end, h.err = sidecar.Run(ctx, sidecar.Options{SessionID: h.id, Config: cfg, Redis: as, CommandBlock: 100 * time.Millisecond})
	}()
	t.Cleanup(func() {
		select {
		case <-done:
		case <-time.After(wait):
			t.Errorf("sidecar of session %s did not end", h.id)
		}
	})

	require.Eventually(t, func() bool { return refused(t, h.rdb, user, "key") }, wait, 20*time.Millisecond, "Redis refused the inbox")
	require.NoError(t, h.rdb.Do(ctx, "ACL", "SETUSER", user, "~"+protocol.EventsKey(h.id)+":*").Err())

	got := h.waitFor("the predecessor's message delivered", func(e protocol.Entry) bool {
		return e.Type == protocol.EventMessageDelivered && dataField(t, e, "message_id") == "m-left"
	})
	assert.NotEmpty(t, got.ID)
	stopID := h.send(protocol.CommandStop, nil)
	h.waitAck(protocol.EventStopAck, stopID)
	h.waitEnd()
}
