package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// MaxBodyBytes is the largest request body an operation reads, unless it
// sets a limit of its own (Huma's default).
const MaxBodyBytes = 1 << 20

// BodyReadTimeout is how long a client may take to send a request body.
const BodyReadTimeout = 30 * time.Second

// BodyBounds bound what a server reads of request bodies, for every
// handler it serves: the API, the UI and the health endpoints.
type BodyBounds struct {
	// MaxBytes is the largest body a request may declare; default
	// MaxBodyBytes.
	MaxBytes int64
	// ReadTimeout is how long a client may take to send its body, from
	// the end of its headers; default BodyReadTimeout.
	ReadTimeout time.Duration
}

// Handler wraps h. A request that declares a Content-Length above
// MaxBytes is answered 413 at once, without reading its body. A request
// with a body must send all of it within ReadTimeout, or its read fails
// and the connection is closed: a client that trickles a body holds no
// handler. The deadline is the connection's, set only for a request with
// a body, from the start of its handler, and cleared once the body has
// been read: a long command, a live stream or a WebSocket, which send no
// body or have sent it, is never cut. (net/http clears a connection's
// read deadline too when it starts its background read after the body,
// and when a handler hijacks the connection; the wrapper does not rely
// on it.)
func (b BodyBounds) Handler(h http.Handler) http.Handler {
	if b.MaxBytes <= 0 {
		b.MaxBytes = MaxBodyBytes
	}
	if b.ReadTimeout <= 0 {
		b.ReadTimeout = BodyReadTimeout
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > b.MaxBytes {
			p := newProblemOf(http.StatusRequestEntityTooLarge, KindValidation,
				fmt.Sprintf("the request body of %d bytes is larger than the %d bytes allowed", r.ContentLength, b.MaxBytes))
			// The body is not read: the connection cannot serve another request.
			w.Header().Set("Connection", "close")
			WriteProblem(w, p)
			return
		}
		if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
			rc := http.NewResponseController(w)
			// An in-process call (a door's) has no connection: nothing to bound.
			if rc.SetReadDeadline(time.Now().Add(b.ReadTimeout)) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, clear: func() { _ = rc.SetReadDeadline(time.Time{}) }}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody clears the connection's read deadline once the body has
// been read to its end. A read that failed keeps it: net/http then tries
// to read what is left of the body, which must fail as fast.
type deadlineBody struct {
	io.ReadCloser
	clear   func()
	cleared bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && !b.cleared {
		b.cleared = true
		b.clear()
	}
	return n, err
}
