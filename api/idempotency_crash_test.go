package api

import (
	"context"
	"crypto/sha256"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
)

// TestRepeatAfterTheAPIDiedMidRequest: the process that took an
// Idempotency-Key died before it stored the response, leaving the key
// held. A repeat is answered with the command's result as soon as the
// command was applied, and takes over an attempt whose command never ran
// once the dead process stops renewing the key, in seconds.
func TestRepeatAfterTheAPIDiedMidRequest(t *testing.T) {
	st := newStack(t, Config{}, true)
	u := newUser(t)
	s, _ := st.running(t, u, nil)
	ctx := context.Background()
	dead := NewPostgresIdempotency(st.db)

	t.Run("the command was applied", func(t *testing.T) {
		path := "/api/agents/sessions/" + s.ID.String() + "/pause"
		k := IdempotencyScope{Caller: "user:" + u.id.String(), Method: http.MethodPost, Path: path, Key: uuid.NewString()}
		// What the dead process did: take the key, send the command, and
		// die before the response was stored.
		stored, err := dead.Begin(ctx, k, sha256.Sum256(nil))
		require.NoError(t, err)
		require.Nil(t, stored)
		cmd, err := command.New(domain.AggregateSession, command.PauseSession, s.ID, u.id.String(), nil)
		require.NoError(t, err)
		cmd.ID = commandIDOf(k)
		wait, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		res, err := st.client.Do(wait, cmd)
		require.NoError(t, err)
		require.NoError(t, res.Err())

		resp := st.call(t, http.MethodPost, path, nil, u.auth, IdempotencyKeyHeader+": "+k.Key)
		require.Equal(t, http.StatusOK, resp.Code, "the applied command's result, not 409: %s", resp)
		assert.Equal(t, "Pausing", string(decode[SessionDetail](t, resp).Status))
		again := st.call(t, http.MethodPost, path, nil, u.auth, IdempotencyKeyHeader+": "+k.Key)
		require.Equal(t, http.StatusOK, again.Code, again.String())
		assert.Equal(t, "true", again.Header.Get(IdempotentReplayedHeader), "stored now")
	})

	t.Run("the command never ran", func(t *testing.T) {
		path := "/api/agents/sessions/" + s.ID.String() + "/messages/queue"
		body := `{"content":"Use the standard library only"}`
		k := IdempotencyScope{Caller: "user:" + u.id.String(), Method: http.MethodPost, Path: path, Key: uuid.NewString()}
		_, err := dead.Begin(ctx, k, sha256.Sum256([]byte(body)))
		require.NoError(t, err)
		resp := st.call(t, http.MethodPost, path, body, u.auth, IdempotencyKeyHeader+": "+k.Key)
		require.Equal(t, http.StatusConflict, resp.Code, "held, and nothing applied yet: %s", resp)
		// The bound is far above the lock timeout, far below the minute
		// an abandoned key was once held.
		require.Eventually(t, func() bool {
			resp = st.call(t, http.MethodPost, path, body, u.auth, IdempotencyKeyHeader+": "+k.Key)
			return resp.Code != http.StatusConflict
		}, 30*time.Second, 250*time.Millisecond, "the abandoned attempt is taken over")
		require.Equal(t, http.StatusCreated, resp.Code, resp.String())
		assert.Len(t, decode[MessageQueue](t, resp).Messages, 1, "enqueued once")
	})
}
