package main

import (
	"net/http"
	"time"

	"github.com/agentbus/agentbus/api"
)

// newHTTPServer is every HTTP server of the commands (up, api, and the
// health servers of worker and relay): headers within 10 s, and request
// bodies within api.BodyBounds (a declared body over the limit is 413 at
// once, a trickled one is cut off). No read or write timeout on the
// server itself: live streams stay open, each SSE write has its own
// deadline.
func newHTTPServer(addr string, h http.Handler) *http.Server {
	return &http.Server{Addr: addr, Handler: api.BodyBounds{}.Handler(h), ReadHeaderTimeout: 10 * time.Second}
}
