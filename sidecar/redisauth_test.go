package sidecar_test

import (
	"context"
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
	require.Eventually(t, func() bool { return refused(t, h.rdb, user) }, wait, 20*time.Millisecond, "Redis refused the sidecar")
	require.NoError(t, h.rdb.Do(ctx, "ACL", "SETUSER", user, "reset", "on", ">"+password,
		"~"+protocol.EventsKey(h.id), "~"+protocol.EventsKey(h.id)+":*", "+@all").Err())

	first := h.waitFor("the first event", func(protocol.Entry) bool { return true })
	assert.Equal(t, protocol.EventSessionStarted, first.Type, "the session started: %s", h.dump())
	assert.Equal(t, protocol.ReasonCompleted, h.waitEnd().Reason)
}

// refused reports whether Redis's ACL log holds a refused login of user.
func refused(t *testing.T, rdb *redis.Client, user string) bool {
	entries, err := rdb.Do(context.Background(), "ACL", "LOG").Slice()
	require.NoError(t, err)
	for _, e := range entries {
		if entryNames(e, user) {
			return true
		}
	}
	return false
}

// entryNames reports whether an ACL LOG entry (RESP2 list or RESP3 map) is
// a refused login of user.
func entryNames(e any, user string) bool {
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
	return fields["reason"] == "auth" && strings.EqualFold(fields["username"], user)
}
