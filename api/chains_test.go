package api

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
)

// requireInvalid checks a 422 that names the failing field at location.
func requireInvalid(t *testing.T, r response, location string) {
	t.Helper()
	require.Equal(t, http.StatusUnprocessableEntity, r.Code, r.String())
	p := r.problem(t)
	assert.Equal(t, "validation", p["kind"], r.String())
	assert.Equal(t, location, p["errors"].([]any)[0].(map[string]any)["location"], r.String())
}

// requireNotFound checks a 404.
func requireNotFound(t *testing.T, r response) {
	t.Helper()
	require.Equal(t, http.StatusNotFound, r.Code, r.String())
	assert.Equal(t, "not_found", r.problem(t)["kind"], r.String())
}

// requireConflict checks a 409 that gives the current status; "" for a
// conflict that is not about a status (a name in use).
func requireConflict(t *testing.T, r response, current string) {
	t.Helper()
	require.Equal(t, http.StatusConflict, r.Code, r.String())
	p := r.problem(t)
	assert.Equal(t, "conflict", p["kind"], r.String())
	if current == "" {
		assert.NotContains(t, p, "currentStatus", r.String())
		return
	}
	assert.Equal(t, current, p["currentStatus"], r.String())
}

// chain makes a chain around u's session, as the handoff reaction does at
// its first context exhaustion.
func (st *stack) chain(t testing.TB, u user, first uuid.UUID) uuid.UUID {
	t.Helper()
	id := command.ChainIDFor(first)
	cmd, err := command.New(domain.AggregateChain, command.CreateChain, id, u.id.String(), command.CreateChainData{FirstSessionID: first})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := st.client.Do(ctx, cmd)
	require.NoError(t, err)
	require.Nil(t, res.Error, "create chain: %v", res.Error)
	return id
}

func TestChains(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{}, true)
	alice, bob := newUser(t), newUser(t)
	idle := st.idle(t, alice, nil)
	done := st.chain(t, alice, idle.ID)
	busy, _ := st.running(t, alice, nil)
	live := st.chain(t, alice, busy.ID)
	chainURL := func(id uuid.UUID) string { return "/api/agents/chains/" + id.String() }

	t.Run("list", func(t *testing.T) {
		resp := st.call(t, http.MethodGet, "/api/agents/chains", nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		list := decode[ChainList](t, resp)
		assert.Equal(t, 2, list.Total)
		require.Len(t, list.Items, 2)
		assert.Equal(t, live, list.Items[0].ID, "newest first")
		byID := map[uuid.UUID]ChainSummary{}
		for _, c := range list.Items {
			byID[c.ID] = c
		}
		c := byID[done]
		assert.Equal(t, "Active", c.Status)
		assert.Equal(t, 1, c.SessionCount)
		assert.Equal(t, idle.ID, c.CurrentSessionID)
		assert.Equal(t, idle.Objective, c.OriginalObjective)

		paged := decode[ChainList](t, st.call(t, http.MethodGet, "/api/agents/chains?pageSize=1&page=2", nil, alice.auth))
		assert.Equal(t, ChainList{Items: paged.Items, Total: 2, Page: 2, PageSize: 1}, paged)
		require.Len(t, paged.Items, 1)
		assert.Equal(t, done, paged.Items[0].ID)

		none := decode[ChainList](t, st.call(t, http.MethodGet, "/api/agents/chains?status=Completed", nil, alice.auth))
		assert.Equal(t, 0, none.Total)
		assert.NotNil(t, none.Items)

		theirs := decode[ChainList](t, st.call(t, http.MethodGet, "/api/agents/chains", nil, bob.auth))
		assert.Equal(t, 0, theirs.Total, "another owner's chains are not listed")

		requireInvalid(t, st.call(t, http.MethodGet, "/api/agents/chains?status=Done", nil, alice.auth), "query.status")
		requireInvalid(t, st.call(t, http.MethodGet, "/api/agents/chains?pageSize=101", nil, alice.auth), "query.pageSize")
		require.Equal(t, http.StatusUnauthorized, st.call(t, http.MethodGet, "/api/agents/chains", nil).Code)
	})

	t.Run("get", func(t *testing.T) {
		resp := st.call(t, http.MethodGet, chainURL(done), nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		c := decode[ChainDetail](t, resp)
		assert.Equal(t, done, c.ID)
		assert.Equal(t, "Active", c.Status)
		assert.Equal(t, idle.ID, c.CurrentSessionID)
		require.Len(t, c.Sessions, 1)
		assert.Equal(t, ChainedSession{SessionID: idle.ID, Position: 1, JoinedAt: c.Sessions[0].JoinedAt,
			Name: idle.Name, Status: "Idle"}, c.Sessions[0])
		assert.Empty(t, c.HandoffDocuments)
		assert.NotNil(t, c.HandoffDocuments)

		requireNotFound(t, st.call(t, http.MethodGet, chainURL(done), nil, bob.auth))
		requireNotFound(t, st.call(t, http.MethodGet, chainURL(uuid.New()), nil, alice.auth))
		requireInvalid(t, st.call(t, http.MethodGet, "/api/agents/chains/x", nil, alice.auth), "path.id")
	})

	t.Run("complete", func(t *testing.T) {
		requireNotFound(t, st.call(t, http.MethodPost, chainURL(done)+"/complete", nil, bob.auth))
		requireConflict(t, st.call(t, http.MethodPost, chainURL(live)+"/complete", nil, alice.auth), "Running")

		resp := st.call(t, http.MethodPost, chainURL(done)+"/complete", nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		c := decode[ChainDetail](t, resp)
		assert.Equal(t, "Completed", c.Status)
		require.NotNil(t, c.CompletedAt)
		assert.Len(t, c.Sessions, 1)
		assert.Equal(t, c, decode[ChainDetail](t, st.call(t, http.MethodGet, chainURL(done), nil, alice.auth)))

		requireConflict(t, st.call(t, http.MethodPost, chainURL(done)+"/complete", nil, alice.auth), "Completed")
		requireNotFound(t, st.call(t, http.MethodPost, chainURL(uuid.New())+"/complete", nil, alice.auth))
		requireInvalid(t, st.call(t, http.MethodPost, "/api/agents/chains/x/complete", nil, alice.auth), "path.id")
	})

	t.Run("cancel", func(t *testing.T) {
		requireNotFound(t, st.call(t, http.MethodPost, chainURL(live)+"/cancel", nil, bob.auth))

		resp := st.call(t, http.MethodPost, chainURL(live)+"/cancel", nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		c := decode[ChainDetail](t, resp)
		assert.Equal(t, "Cancelled", c.Status)
		require.NotNil(t, c.CompletedAt)

		requireConflict(t, st.call(t, http.MethodPost, chainURL(live)+"/cancel", nil, alice.auth), "Cancelled")
		requireNotFound(t, st.call(t, http.MethodPost, chainURL(uuid.New())+"/cancel", nil, alice.auth))
		requireInvalid(t, st.call(t, http.MethodPost, "/api/agents/chains/x/cancel", nil, alice.auth), "path.id")

		list := decode[ChainList](t, st.call(t, http.MethodGet, "/api/agents/chains?status=Cancelled", nil, alice.auth))
		require.Len(t, list.Items, 1)
		assert.Equal(t, live, list.Items[0].ID)
	})
}
