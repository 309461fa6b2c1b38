// Package client is a typed client of agentbus's public HTTP API for
// people's tools: the sessions, their queues, the pool and the live
// stream of a session. It speaks only HTTP and JSON, as any other client
// of the OpenAPI document does.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client talks to one agentbus API as the holder of one bearer token.
type Client struct {
	// Base is the API's base URL, such as http://127.0.0.1:8080.
	Base string
	// Token is the bearer token; empty sends none.
	Token string
	// HTTP sends the requests; nil is a client without a timeout, which
	// the live stream needs.
	HTTP *http.Client
	// CallTimeout bounds every request but the live stream; zero is one
	// minute.
	CallTimeout time.Duration
}

// Answer is a decoded answer of the API with the JSON it was decoded
// from, so that tools can print what the API said as it said it.
type Answer[T any] struct {
	Value T
	JSON  json.RawMessage
}

// Problem is an error answer of the API: an application/problem+json
// document (RFC 9457) with agentbus's extensions.
type Problem struct {
	Status int    `json:"status"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
	// Kind is the error's kind: validation, conflict, not_found,
	// unauthorized, forbidden, rate_limited, internal.
	Kind string `json:"kind"`
	// CurrentStatus is the session's status when a transition conflicts with it.
	CurrentStatus string        `json:"currentStatus"`
	Errors        []ErrorDetail `json:"errors"`
}

// ErrorDetail is one failing input of a validation problem.
type ErrorDetail struct {
	Location string `json:"location"`
	Message  string `json:"message"`
	Value    any    `json:"value"`
}

// Error is the problem on one line: the title, the detail, and each
// failing input.
func (p *Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.Title)
	if b.Len() == 0 {
		b.WriteString(http.StatusText(p.Status))
	}
	if p.Detail != "" && p.Detail != p.Title {
		b.WriteString(": " + p.Detail)
	}
	for _, e := range p.Errors {
		b.WriteString("; ")
		if e.Location != "" {
			b.WriteString(e.Location + ": ")
		}
		b.WriteString(e.Message)
	}
	return b.String()
}

// StatusError is an answer that is neither a success nor a problem
// document, such as a proxy's error page.
type StatusError struct {
	Status int
	Body   string
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("the API answered %d %s", e.Status, http.StatusText(e.Status))
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// StatusOf returns the HTTP status of an error answer, or 0 when err is
// no answer of the API (the API could not be reached, say).
func StatusOf(err error) int {
	var p *Problem
	if errors.As(err, &p) {
		return p.Status
	}
	var s *StatusError
	if errors.As(err, &s) {
		return s.Status
	}
	return 0
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// newRequest builds a request to path (which starts with /api/) with the
// token and, when body is not nil, its JSON.
func (c *Client) newRequest(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.Base, "/")+path, r)
	if err != nil {
		return nil, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// call sends one request and decodes a successful answer into an Answer.
func call[T any](ctx context.Context, c *Client, method, path string, body any) (Answer[T], error) {
	var out Answer[T]
	timeout := c.CallTimeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := c.newRequest(ctx, method, path, body)
	if err != nil {
		return out, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return out, fmt.Errorf("cannot reach the API at %s: %w", c.Base, unwrapURLError(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return out, fmt.Errorf("reading the answer of %s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		return out, errorOf(resp, raw)
	}
	out.JSON = raw
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out.Value); err != nil {
			return out, fmt.Errorf("the answer of %s %s is not what the API documents: %w", method, path, err)
		}
	}
	return out, nil
}

// errorOf reads an error answer: its problem document when it has one.
func errorOf(resp *http.Response, raw []byte) error {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "application/problem+json" || mt == "application/json" {
		p := &Problem{}
		if json.Unmarshal(raw, p) == nil && (p.Title != "" || p.Detail != "") {
			if p.Status == 0 {
				p.Status = resp.StatusCode
			}
			return p
		}
	}
	body := strings.TrimSpace(string(raw))
	if len(body) > 200 {
		body = body[:200] + "…"
	}
	return &StatusError{Status: resp.StatusCode, Body: body}
}

// unwrapURLError drops the method and URL that net/http repeats in each
// error: the caller names the API once.
func unwrapURLError(err error) error {
	var u *url.Error
	if errors.As(err, &u) {
		return u.Err
	}
	return err
}
