package api

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// boundsTimeout is the body read timeout of the tests: short, so a
// handler that outlives it shows it is not cut.
const boundsTimeout = 200 * time.Millisecond

// serveBounded serves h behind BodyBounds on a real connection, as the
// commands serve the API, and returns its address.
func serveBounded(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(BodyBounds{MaxBytes: 1 << 10, ReadTimeout: boundsTimeout}.Handler(h))
	srv.Config.ReadHeaderTimeout = 10 * time.Second
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// sendRaw writes raw bytes on a new connection and returns it with a reader
// of the response.
func sendRaw(t *testing.T, addr, raw string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_, err = io.WriteString(c, raw)
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	return c, bufio.NewReader(c)
}

// slowHandlers outlive the body read timeout, and say whether their
// request was cancelled meanwhile.
func slowHandlers() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /read", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "read: "+err.Error(), http.StatusBadRequest)
			return
		}
		time.Sleep(3 * boundsTimeout)
		fmt.Fprintf(w, "read %d bytes, cancelled: %v", len(body), r.Context().Err() != nil)
	})
	mux.HandleFunc("GET /stream", func(w http.ResponseWriter, r *http.Request) {
		for range 6 {
			fmt.Fprintln(w, "tick")
			w.(http.Flusher).Flush()
			time.Sleep(boundsTimeout / 2)
		}
		fmt.Fprintf(w, "cancelled: %v\n", r.Context().Err() != nil)
	})
	mux.HandleFunc("GET /hijack", func(w http.ResponseWriter, r *http.Request) {
		c, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\n")
		_ = rw.Flush()
		line, err := rw.ReadString('\n')
		if err != nil {
			line = "read: " + err.Error() + "\n"
		}
		_, _ = rw.WriteString("echo " + line)
		_ = rw.Flush()
	})
	return mux
}

// TestBodyBounds: a body declared larger than the limit is refused 413 at
// once; a trickled body is cut off; a request without a body, or whose
// body has been read, is not bounded however long it lasts.
func TestBodyBounds(t *testing.T) {
	t.Parallel()

	t.Run("a declared Content-Length above the limit is 413 at once, before the body", func(t *testing.T) {
		t.Parallel()
		addr := serveBounded(t, newServer(t, Config{}, Deps{}))
		c, r := sendRaw(t, addr, "POST /api/agents/sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n")
		require.NoError(t, c.SetReadDeadline(time.Now().Add(2*time.Second)), "no body is sent: the answer cannot wait for it")
		resp, err := http.ReadResponse(r, nil)
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
		assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		p := decodeProblem(t, raw)
		assert.EqualValues(t, 413, p["status"])
		assert.Contains(t, p["detail"], "4096 bytes is larger than the 1024 bytes allowed")
	})

	t.Run("a body within the limit is read", func(t *testing.T) {
		t.Parallel()
		addr := serveBounded(t, slowHandlers())
		_, r := sendRaw(t, addr, "POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 1024\r\n\r\n"+strings.Repeat("x", 1024))
		resp, err := http.ReadResponse(r, nil)
		require.NoError(t, err)
		raw, _ := io.ReadAll(resp.Body)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "read 1024 bytes, cancelled: false", string(raw), "the handler outlived the timeout, uncut")
	})

	t.Run("a trickled body is cut off", func(t *testing.T) {
		t.Parallel()
		addr := serveBounded(t, slowHandlers())
		c, r := sendRaw(t, addr, "POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nfirst")
		start := time.Now()
		go func() {
			// One byte now and then, each well within the timeout.
			for range 95 {
				time.Sleep(boundsTimeout / 4)
				if _, err := c.Write([]byte("x")); err != nil {
					return
				}
			}
		}()
		resp, err := http.ReadResponse(r, nil)
		require.NoError(t, err)
		raw, _ := io.ReadAll(resp.Body)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, string(raw))
		assert.Contains(t, string(raw), "timeout")
		assert.Less(t, time.Since(start), 10*boundsTimeout, "cut off near the timeout, not after the whole body")
	})

	t.Run("a live stream without a body is not cut", func(t *testing.T) {
		t.Parallel()
		addr := serveBounded(t, slowHandlers())
		_, r := sendRaw(t, addr, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(r, nil)
		require.NoError(t, err)
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, 6, strings.Count(string(raw), "tick"))
		assert.Contains(t, string(raw), "cancelled: false")
	})

	t.Run("a hijacked connection is not cut", func(t *testing.T) {
		t.Parallel()
		addr := serveBounded(t, slowHandlers())
		c, r := sendRaw(t, addr, "GET /hijack HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
		resp, err := http.ReadResponse(r, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
		time.Sleep(3 * boundsTimeout)
		_, err = io.WriteString(c, "hello\n")
		require.NoError(t, err)
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		assert.Equal(t, "echo hello\n", line)
	})
}
