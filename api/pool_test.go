package api

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
)

func TestConfigurePool(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{}, true)
	alice, bob := newUser(t), newUser(t)
	put := func(t *testing.T, u user, body any) response {
		t.Helper()
		return st.call(t, http.MethodPut, "/api/agents/pool", body, u.auth)
	}
	get := func(t *testing.T, u user) PoolUtilization {
		t.Helper()
		resp := st.call(t, http.MethodGet, "/api/agents/pool", nil, u.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		return decode[PoolUtilization](t, resp)
	}

	t.Run("422 for a size that is not a whole number in range", func(t *testing.T) {
		for name, body := range map[string]any{
			"zero":         map[string]any{"maxConcurrentSessions": 0},
			"negative":     map[string]any{"maxConcurrentSessions": -1},
			"too large":    map[string]any{"maxConcurrentSessions": domain.MaxMaxConcurrentSessions + 1},
			"not a number": map[string]any{"maxConcurrentSessions": "two"},
		} {
			t.Run(name, func(t *testing.T) {
				requireInvalid(t, put(t, alice, body), "body.maxConcurrentSessions")
			})
		}
		assert.Equal(t, domain.DefaultMaxConcurrentSessions, get(t, alice).MaxCount, "a refused size changes nothing")
	})

	t.Run("401 without a token", func(t *testing.T) {
		assert.Equal(t, http.StatusUnauthorized, st.call(t, http.MethodPut, "/api/agents/pool", map[string]any{"maxConcurrentSessions": 2}).Code)
	})

	t.Run("raising starts the oldest Queued sessions, lowering stops none", func(t *testing.T) {
		st.running(t, alice, nil)
		oldest, _ := st.start(t, alice, nil)
		newest, _ := st.start(t, alice, nil)

		resp := put(t, alice, map[string]any{"maxConcurrentSessions": 2})
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		assert.Equal(t, PoolUtilization{ActiveCount: 2, MaxCount: 2, AvailableSlots: 0, Percentage: 100}, decode[PoolUtilization](t, resp))
		assert.Equal(t, "Running", st.session(t, alice, oldest.ID).Status)
		assert.Equal(t, "Queued", st.session(t, alice, newest.ID).Status)

		resp = put(t, alice, map[string]any{"maxConcurrentSessions": 1})
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		assert.Equal(t, PoolUtilization{ActiveCount: 2, MaxCount: 1, AvailableSlots: 0, Percentage: 200}, decode[PoolUtilization](t, resp))
		assert.Equal(t, PoolUtilization{ActiveCount: 2, MaxCount: 1, AvailableSlots: 0, Percentage: 200}, get(t, alice))
		assert.Equal(t, "Running", st.session(t, alice, oldest.ID).Status)
		assert.Equal(t, "Queued", st.session(t, alice, newest.ID).Status)
	})

	t.Run("each user has a pool of their own", func(t *testing.T) {
		assert.Equal(t, domain.DefaultMaxConcurrentSessions, get(t, bob).MaxCount)
	})
}

// TestPoolConfigLimitsMatchTheDomain keeps the document's range of the
// pool's size the one the domain accepts.
func TestPoolConfigLimitsMatchTheDomain(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{}, Deps{})
	schema := s.API().OpenAPI().Components.Schemas.Map()["PoolConfig"].Properties["maxConcurrentSessions"]
	require.NotNil(t, schema)
	require.NotNil(t, schema.Minimum)
	require.NotNil(t, schema.Maximum)
	assert.Equal(t, 1.0, *schema.Minimum)
	assert.Equal(t, float64(domain.MaxMaxConcurrentSessions), *schema.Maximum)
}
