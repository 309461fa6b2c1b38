package commands_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres/queries"
)

func TestIssueSidecarKey(t *testing.T) {
	h := startWorker(t, 0)
	store := queries.New(h.pool, domain.SessionPool{})
	lookup := func(key string) (uuid.UUID, error) {
		id, _, err := store.LookupSession(context.Background(), sha256.Sum256([]byte(key)))
		return id, err
	}
	issue := func(cmd command.Command) (command.Result, string) {
		r, err := h.client.Do(context.Background(), cmd)
		require.NoError(t, err)
		var out command.IssueSidecarKeyResult
		if r.Err() == nil {
			require.NoError(t, json.Unmarshal(r.State, &out))
		}
		return r, out.APIKey
	}

	script := command.IssueSidecarKeyData{Engine: "script"}
	queued := h.newSession(t, false)
	cmd, err := command.New(domain.AggregateSession, command.IssueSidecarKey, queued, "", script)
	require.NoError(t, err)
	r, _ := issue(cmd)
	e, ok := command.AsError(r.Err())
	require.True(t, ok, "a Queued session has no sidecar to give a key")
	assert.Equal(t, command.KindConflict, e.Kind)

	id := h.newSession(t, true)
	cmd, err = command.New(domain.AggregateSession, command.IssueSidecarKey, id, "", script)
	require.NoError(t, err)
	r, first := issue(cmd)
	require.NoError(t, r.Err())
	require.NotEmpty(t, first, "the live reply carries the key")
	got, err := lookup(first)
	require.NoError(t, err)
	assert.Equal(t, id, got, "the sidecar key authenticates as its session")

	_, again := issue(cmd)
	assert.Empty(t, again, "a repeat gets the stored result, which never holds the key")

	cmd, err = command.New(domain.AggregateSession, command.IssueSidecarKey, id, "", script)
	require.NoError(t, err)
	_, second := issue(cmd)
	require.NotEmpty(t, second)
	_, err = lookup(first)
	require.ErrorIs(t, err, queries.ErrNotFound, "a new sidecar key retires the previous one")
	got, err = lookup(second)
	require.NoError(t, err)
	assert.Equal(t, id, got)

	cmd, err = command.New(domain.AggregateSession, command.IssueSidecarKey, id, h.owner.String(), script)
	require.NoError(t, err)
	r, key := issue(cmd)
	e, ok = command.AsError(r.Err())
	require.True(t, ok, "a person's command never gets the sidecar's key")
	assert.Equal(t, command.KindNotFound, e.Kind)
	assert.Empty(t, key)
}
