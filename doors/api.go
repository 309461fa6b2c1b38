// Package doors holds what the client protocols other than HTTP share:
// seed 004's WebSocket (doors/ws) and seed 002's local NDJSON socket
// (doors/localsocket). A door is a translation, not a service of its own:
// it sends every command as a call of the HTTP API's operation for it,
// with the caller's credentials (so authentication, validation, rate
// limits and errors are the API's own), and it reads each session's live
// feed from the same place the SSE stream does. It keeps no state the bus
// does not have: a client that reconnects names the sessions and the last
// event ids it holds, and misses nothing.
package doors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// API reaches the HTTP API's operations as one caller.
type API interface {
	// Call sends one request with the caller's credentials and returns
	// the answer; the error is for transport failures only.
	Call(ctx context.Context, method, path string, body any) (Response, error)
}

// Response is the answer of one call.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// InProcess calls an API handler in this process: the door and the API
// share the handler, so a door's command costs no network round trip.
type InProcess struct {
	Handler http.Handler
	// Authorization is the header the calls carry (Bearer <token>).
	Authorization string
}

// Call serves the request with the handler.
func (a InProcess) Call(ctx context.Context, method, path string, body any) (Response, error) {
	req, err := newRequest(ctx, method, "http://agentbus"+path, body, a.Authorization)
	if err != nil {
		return Response{}, err
	}
	w := &recorder{header: http.Header{}, status: http.StatusOK}
	a.Handler.ServeHTTP(w, req)
	return Response{Status: w.status, Header: w.header, Body: w.body.Bytes()}, nil
}

// Remote calls the HTTP API of a deployment over the network.
type Remote struct {
	// Base is the API's base URL, http://host:port.
	Base          string
	Authorization string
	Client        *http.Client
}

// Call sends the request over HTTP.
func (a Remote) Call(ctx context.Context, method, path string, body any) (Response, error) {
	req, err := newRequest(ctx, method, strings.TrimSuffix(a.Base, "/")+path, body, a.Authorization)
	if err != nil {
		return Response{}, err
	}
	client := a.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return Response{}, err
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: raw}, nil
}

func newRequest(ctx context.Context, method, url string, body any, auth string) (*http.Request, error) {
	// A request as a server receives it always has a body, if empty.
	var r io.Reader = http.NoBody
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", auth)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// recorder is the response writer of an in-process call.
type recorder struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.body.Write(b)
}

// Error is a refusal as the HTTP API words it (its problem+json): the
// same kind and message reach every door's client.
type Error struct {
	// Kind is the problem's kind: validation, conflict, not_found,
	// unauthorized, forbidden, rate_limited, internal.
	Kind string `json:"kind"`
	// Message is the problem's detail.
	Message string `json:"message"`
	// Status is the HTTP status the API answered.
	Status int `json:"status,omitempty"`
	// Field is the failing input, for a validation error.
	Field string `json:"field,omitempty"`
	// CurrentStatus is the session's status, for a refused transition.
	CurrentStatus string `json:"currentStatus,omitempty"`
	// RetryAfterSeconds says when to try again, for rate_limited.
	RetryAfterSeconds int `json:"retryAfterSeconds,omitempty"`
}

// Error kinds a door gives of its own; they are the API's.
const (
	KindValidation   = "validation"
	KindConflict     = "conflict"
	KindNotFound     = "not_found"
	KindUnauthorized = "unauthorized"
	KindRateLimited  = "rate_limited"
	KindInternal     = "internal"
)

func (e *Error) Error() string { return e.Kind + ": " + e.Message }

// Errorf is an error of kind of the door itself.
func Errorf(kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// problem is the part of the API's problem+json a door passes on.
type problem struct {
	Status        int    `json:"status"`
	Detail        string `json:"detail"`
	Kind          string `json:"kind"`
	CurrentStatus string `json:"currentStatus"`
	Errors        []struct {
		Location string `json:"location"`
		Message  string `json:"message"`
	} `json:"errors"`
}

// ErrorOf reads a refusal from an answer of status 400 or more.
func ErrorOf(resp Response) *Error {
	var p problem
	_ = json.Unmarshal(resp.Body, &p)
	e := &Error{Kind: p.Kind, Message: p.Detail, Status: resp.Status, CurrentStatus: p.CurrentStatus}
	if e.Kind == "" {
		e.Kind = KindInternal
	}
	if e.Message == "" {
		e.Message = http.StatusText(resp.Status)
	}
	if len(p.Errors) > 0 {
		e.Field = p.Errors[0].Location
		if p.Errors[0].Message != "" && p.Errors[0].Message != e.Message {
			e.Message += ": " + p.Errors[0].Message
		}
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		e.RetryAfterSeconds = s
	}
	return e
}

// Do calls the API and decodes a success into out (when not nil); a
// refusal is an *Error.
func Do(ctx context.Context, a API, method, path string, body, out any) error {
	resp, err := a.Call(ctx, method, path, body)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &Error{Kind: KindInternal, Message: "the API is not available"}
	}
	if resp.Status >= 400 {
		return ErrorOf(resp)
	}
	if out != nil && len(resp.Body) > 0 {
		if err := json.Unmarshal(resp.Body, out); err != nil {
			return fmt.Errorf("doors: decode %s %s: %w", method, path, err)
		}
	}
	return nil
}

// Millis is a time as Unix milliseconds, the timestamp of both protocols.
func Millis(t time.Time) int64 { return t.UnixMilli() }

// Authenticate reports whether the API accepts a's credentials, as every
// operation would: it asks for the session with the nil id, which no one
// has, so an accepted caller gets not_found and a refused one the API's
// unauthorized error.
func Authenticate(ctx context.Context, a API) error {
	err := Do(ctx, a, http.MethodGet, "/api/agents/sessions/"+uuid.Nil.String(), nil, nil)
	var e *Error
	if errors.As(err, &e) && e.Kind == KindNotFound {
		return nil
	}
	return err
}
