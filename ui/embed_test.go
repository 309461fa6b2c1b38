package ui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTheDashboardIsServedFromTheBinary(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(Handler())
	t.Cleanup(srv.Close)
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(b)
	}

	resp, page := get("/ui")
	require.Equal(t, http.StatusOK, resp.StatusCode, "/ui leads to the app")
	assert.Equal(t, "/ui/", resp.Request.URL.Path)
	assert.Contains(t, page, `<div id="app">`)
	assert.Contains(t, page, `src="app.js"`)

	resp, js := get("/ui/app.js")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript"), resp.Header.Get("Content-Type"))
	assert.Contains(t, js, "/api/agents/sessions/", "the app talks to the API")

	resp, _ = get("/ui/app.css")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = get("/ui/missing.js")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}
