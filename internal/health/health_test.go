package health_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/health"
)

func TestReadyzReportsEachCheck(t *testing.T) {
	var checks health.Checks
	failing := errors.New("connection refused")
	var redisErr error
	checks.Add("postgres", func(context.Context) error { return nil })
	checks.Add("redis", func(context.Context) error { return redisErr })
	mux := http.NewServeMux()
	checks.Register(mux)

	get := func(path string) (int, map[string]any) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var body map[string]any
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
		return rec.Code, body
	}

	code, body := get("/readyz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ready", body["status"])

	redisErr = failing
	code, body = get("/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "not ready", body["status"])
	assert.Equal(t, map[string]any{"postgres": "ok", "redis": "connection refused"}, body["checks"])

	checks.Info("sandbox", "off")
	code, body = get("/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code, "a fact does not change the readiness")
	assert.Equal(t, "off", body["sandbox"])

	code, body = get("/healthz")
	assert.Equal(t, http.StatusOK, code, "liveness does not depend on the dependencies")
	assert.Equal(t, "ok", body["status"])
}
