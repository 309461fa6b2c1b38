package api

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCommandWithABodyWaitsPastHumasBodyReadTimeout: a command whose
// request has a body and whose result takes longer than Huma's body read
// timeout (5 s) is answered as any slow command is, 504, not 500: the
// body was read before the handler ran, and no read deadline set after
// it may cancel the request of a client that is still waiting.
func TestCommandWithABodyWaitsPastHumasBodyReadTimeout(t *testing.T) {
	t.Parallel()
	// The commands worker is not running: the command waits its whole
	// timeout, longer than the body read timeout.
	st := newStack(t, Config{CommandTimeout: 7 * time.Second}, false)
	alice := newUser(t)

	resp := st.call(t, http.MethodPost, "/api/agents/sessions", startBody(), alice.auth, "Idempotency-Key: "+uuid.NewString())
	require.Equal(t, http.StatusGatewayTimeout, resp.Code, resp.String())
	assert.Contains(t, resp.problem(t)["detail"], "Idempotency-Key")
}
