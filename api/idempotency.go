package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
)

// IdempotencyKeyHeader is the header a command carries so that a repeat
// returns the first response and changes nothing.
const IdempotencyKeyHeader = "Idempotency-Key"

// IdempotentReplayedHeader is set to "true" on a response replayed for a
// repeated Idempotency-Key.
const IdempotentReplayedHeader = "Idempotent-Replayed"

// metaReplayByCommand, set to true in an operation's Metadata, keeps the
// middleware from storing the operation's responses (they hold a secret,
// such as a new session's API key): a repeat runs the handler again with
// the same CommandID, and the commands worker answers it with the stored
// result of the first command, which leaves the secret out.
const metaReplayByCommand = "idempotencyByCommand"

// maxIdempotencyKey bounds the key's length.
const maxIdempotencyKey = 255

// IdempotencyScope identifies one use of an Idempotency-Key: a key is
// remembered per caller, method and path.
type IdempotencyScope struct {
	// Caller is user:<owner id> or agent:<session id>.
	Caller string
	Method string
	Path   string
	Key    string
}

// StoredResponse is the first response to an idempotent request.
type StoredResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

// Errors of an IdempotencyStore's Begin.
var (
	// ErrIdempotencyInProgress: the first request with the key still runs.
	ErrIdempotencyInProgress = errors.New("a request with this Idempotency-Key is still in progress")
	// ErrIdempotencyMismatch: the key was used with another request body.
	ErrIdempotencyMismatch = errors.New("this Idempotency-Key was used with another request body")
)

// IdempotencyStore remembers the first response to each idempotency key.
type IdempotencyStore interface {
	// Begin claims key k for a request whose body has the SHA-256 hash. It
	// returns (nil, nil) when the caller now holds the key and must call
	// Finish or Abandon; the stored response when the key was used before
	// with the same body; ErrIdempotencyMismatch when it was used with
	// another body; ErrIdempotencyInProgress while the first request runs.
	Begin(ctx context.Context, k IdempotencyScope, requestHash [32]byte) (*StoredResponse, error)
	// Finish stores the response of the request that holds k.
	Finish(ctx context.Context, k IdempotencyScope, resp StoredResponse) error
	// Abandon releases k without a response (the request failed with a
	// server error), so a repeat runs again.
	Abandon(ctx context.Context, k IdempotencyScope) error
	// Renew extends the hold on k of a request that still runs. The
	// middleware renews every idempotencyRenewEvery, so a store lets a
	// repeat take over a key that was not renewed for a few of those: the
	// process that held it died.
	Renew(ctx context.Context, k IdempotencyScope) error
}

// idempotencyRenewEvery is how often a running request renews its key.
const idempotencyRenewEvery = time.Second

type idempotencyKey struct{}

// isCommand reports whether method changes state and so takes an
// Idempotency-Key.
func isCommand(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// commandNamespace derives command ids from idempotency keys.
var commandNamespace = uuid.MustParse("5b0f7c8e-2a4d-4c1b-9e3f-6d8a1b2c3d4e")

// CommandID returns the id of the command a request sends. With an
// Idempotency-Key it is derived from the key (caller, method, path, key),
// so a repeat whose first attempt died half-way sends the same command id
// (the Nats-Msg-Id) and the command still runs once; without one it is
// fresh.
func CommandID(ctx context.Context) uuid.UUID {
	k, ok := ctx.Value(idempotencyKey{}).(IdempotencyScope)
	if !ok {
		return uuid.New()
	}
	return commandIDOf(k)
}

func commandIDOf(k IdempotencyScope) uuid.UUID {
	return uuid.NewSHA1(commandNamespace, []byte(k.Caller+"\n"+k.Method+"\n"+k.Path+"\n"+k.Key))
}

// idempotency is the middleware that makes every command with an
// Idempotency-Key header run once: the first response (status, headers,
// body) is stored, and a repeat of the request gets it back without
// running the handler. A server error is not stored, so a repeat retries.
func (s *Server) idempotency(ctx huma.Context, next func(huma.Context)) {
	op := ctx.Operation()
	key := ctx.Header(IdempotencyKeyHeader)
	if op == nil || !isCommand(op.Method) || key == "" || s.deps.Idempotency == nil {
		next(ctx)
		return
	}
	if len(key) > maxIdempotencyKey {
		s.writeError(ctx, NewKindError(KindValidation, "the Idempotency-Key header is longer than 255 characters").
			WithField("header."+IdempotencyKeyHeader))
		return
	}
	caller := "public"
	if p, ok := PrincipalFrom(ctx.Context()); ok {
		caller = p.scope()
	}
	u := ctx.URL()
	k := IdempotencyScope{Caller: caller, Method: op.Method, Path: u.Path, Key: key}
	if replay, _ := op.Metadata[metaReplayByCommand].(bool); replay {
		// The response holds a secret that must not be stored: the
		// command id derived from the key makes the repeat idempotent,
		// and the command's stored result (without the secret) answers it.
		next(huma.WithValue(ctx, idempotencyKey{}, k))
		return
	}
	body, err := io.ReadAll(limitBody(ctx, op))
	if err != nil {
		s.writeError(ctx, huma.Error400BadRequest("unable to read the request body"))
		return
	}
	if s.beginIdempotent(ctx, k, body) {
		s.runRecorded(ctx, next, k, body)
	}
}

// beginIdempotent takes the key k for this request and reports whether
// the handler is to run; when not, it has answered: with the stored
// response of an earlier request, or with why the key cannot be taken.
func (s *Server) beginIdempotent(ctx huma.Context, k IdempotencyScope, body []byte) bool {
	stored, err := s.deps.Idempotency.Begin(ctx.Context(), k, sha256.Sum256(body))
	switch {
	case errors.Is(err, ErrIdempotencyMismatch):
		s.writeError(ctx, NewKindError(KindValidation, err.Error()).WithField("header."+IdempotencyKeyHeader))
		return false
	case errors.Is(err, ErrIdempotencyInProgress) && s.commandApplied(ctx.Context(), k):
		// The first attempt's process died after its command was applied
		// (or it is about to answer): running the handler again sends the
		// same command id, which is answered with the recorded result.
		return true
	case errors.Is(err, ErrIdempotencyInProgress):
		s.writeError(ctx, NewKindError(KindConflict, err.Error()))
		return false
	case err != nil:
		s.writeError(ctx, err)
		return false
	case stored != nil:
		for name, values := range stored.Header {
			for _, v := range values {
				ctx.AppendHeader(name, v)
			}
		}
		ctx.SetHeader(IdempotentReplayedHeader, "true")
		ctx.SetStatus(stored.Status)
		_, _ = ctx.BodyWriter().Write(stored.Body)
		return false
	}
	return true
}

// runRecorded runs the handler, recording its response, and stores the
// response under k unless it is a server error; otherwise it releases k.
func (s *Server) runRecorded(ctx huma.Context, next func(huma.Context), k IdempotencyScope, body []byte) {
	rec := &recordingContext{humaContext: ctx, body: bytes.NewReader(body), header: http.Header{}}
	// The key outlives a request whose client went away.
	bg := context.WithoutCancel(ctx.Context())
	finished := false
	defer func() {
		if !finished {
			if err := s.deps.Idempotency.Abandon(bg, k); err != nil {
				// The key stays held until its lock runs out, and a
				// repeat takes it over then.
				slog.Warn("api: idempotency key not released", "component", "api", "path", k.Path, "err", err)
			}
		}
	}()
	stopRenewing := s.renewWhileRunning(bg, k)
	next(huma.WithValue(rec, idempotencyKey{}, k))
	stopRenewing()
	if rec.status == 0 || rec.status >= http.StatusInternalServerError {
		return
	}
	if err := s.deps.Idempotency.Finish(bg, k, StoredResponse{Status: rec.status, Header: rec.header, Body: rec.buf.Bytes()}); err != nil {
		return
	}
	finished = true
}

// commandApplied reports whether the command of a request with key k
// (CommandID) has a recorded result. A failed look-up answers no: the
// caller then gets the usual 409 and repeats.
func (s *Server) commandApplied(ctx context.Context, k IdempotencyScope) bool {
	if s.deps.Results == nil {
		return false
	}
	_, ok, err := s.deps.Results.Result(ctx, commandIDOf(k))
	return err == nil && ok
}

// renewWhileRunning renews k until the returned function is called. A
// failed renewal is logged and tried again: at worst a repeat takes the key
// over and runs the same command again, which the command id makes safe.
func (s *Server) renewWhileRunning(ctx context.Context, k IdempotencyScope) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(idempotencyRenewEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if err := s.deps.Idempotency.Renew(ctx, k); err != nil && ctx.Err() == nil {
					slog.Warn("api: idempotency key not renewed", "component", "api", "path", k.Path, "err", err)
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// humaContext lets recordingContext embed a huma.Context: the field's name
// must not clash with the interface's Context method.
type humaContext = huma.Context

// recordingContext passes a response through while keeping a copy of it,
// and serves the request body the middleware already read.
type recordingContext struct {
	humaContext
	body   io.Reader
	status int
	header http.Header
	buf    bytes.Buffer
	w      io.Writer
}

func (c *recordingContext) BodyReader() io.Reader { return c.body }

func (c *recordingContext) SetStatus(code int) {
	c.status = code
	c.humaContext.SetStatus(code)
}

func (c *recordingContext) Status() int { return c.status }

func (c *recordingContext) SetHeader(name, value string) {
	c.header.Set(name, value)
	c.humaContext.SetHeader(name, value)
}

func (c *recordingContext) AppendHeader(name, value string) {
	c.header.Add(name, value)
	c.humaContext.AppendHeader(name, value)
}

func (c *recordingContext) BodyWriter() io.Writer {
	if c.w == nil {
		// The copy first: it must be complete even if the client is gone.
		c.w = io.MultiWriter(&c.buf, c.humaContext.BodyWriter())
	}
	return c.w
}
