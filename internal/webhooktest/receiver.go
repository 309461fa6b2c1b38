// Package webhooktest is a webhook receiver for tests and benchmarks: an
// HTTP server on loopback that records every delivery, answers with the
// status its test chooses, and verifies signatures as a receiver does.
package webhooktest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
)

// Request is one request a receiver got.
type Request struct {
	Header http.Header
	Body   []byte
	// Status is what the receiver answered.
	Status int
	// At is when it arrived.
	At time.Time
}

// ID is the request's webhook-id.
func (r Request) ID() string { return r.Header.Get(standardwebhooks.HeaderWebhookID) }

// Payload is the part of a delivery's body the tests look at.
type Payload struct {
	Type string `json:"type"`
	Data struct {
		EventID   string `json:"eventId"`
		SessionID string `json:"sessionId"`
		Status    string `json:"status"`
		URL       string `json:"url"`
	} `json:"data"`
}

// Payload decodes the request's body.
func (r Request) Payload(t testing.TB) Payload {
	t.Helper()
	var p Payload
	require.NoError(t, json.Unmarshal(r.Body, &p), string(r.Body))
	return p
}

// Verify checks the request's signature with secret, as a receiver does
// with the Standard Webhooks library.
func (r Request) Verify(secret string) error {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return err
	}
	return wh.Verify(r.Body, r.Header)
}

// Receiver is a webhook endpoint on loopback.
type Receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []Request
	answer func(n int) int
	notify chan struct{}
}

// New starts a receiver that answers its n-th request (from 0) with
// answer(n), or 200 when answer is nil; answer may block (a hanging
// receiver). It stops when the test ends.
func New(t testing.TB, answer func(n int) int) *Receiver {
	r := &Receiver{answer: answer, notify: make(chan struct{}, 1)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		at := time.Now()
		r.mu.Lock()
		n := len(r.got)
		r.mu.Unlock()
		status := http.StatusOK
		if r.answer != nil {
			status = r.answer(n)
		}
		r.mu.Lock()
		r.got = append(r.got, Request{Header: req.Header.Clone(), Body: body, Status: status, At: at})
		r.mu.Unlock()
		select {
		case r.notify <- struct{}{}:
		default:
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte("ok from the receiver"))
	}))
	t.Cleanup(r.Close)
	return r
}

// Requests returns the requests answered so far, in the order they came.
func (r *Receiver) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.got...)
}

// Accepted returns the requests answered 2xx, each webhook-id once (the
// first), in the order they came: what a receiver that dedupes keeps.
func (r *Receiver) Accepted() []Request {
	var out []Request
	seen := map[string]bool{}
	for _, g := range r.Requests() {
		if g.Status/100 == 2 && !seen[g.ID()] {
			seen[g.ID()] = true
			out = append(out, g)
		}
	}
	return out
}

// AcceptedIDs returns the webhook-ids of Accepted.
func (r *Receiver) AcceptedIDs() []string {
	var ids []string
	for _, g := range r.Accepted() {
		ids = append(ids, g.ID())
	}
	return ids
}

// Arrived is signalled after each request is answered (coalesced).
func (r *Receiver) Arrived() <-chan struct{} { return r.notify }
