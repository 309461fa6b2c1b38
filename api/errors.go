package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
)

// Error kinds: the kinds of domain/errors.go, named here for the handlers.
// Domain errors, command results and the errors of this package carry one
// of them; MapError turns each into one HTTP status.
const (
	// KindValidation is invalid input: 422, naming the failing field.
	KindValidation = domain.KindValidation
	// KindConflict is a domain rule that forbids the transition in the
	// aggregate's current status: 409, with that status.
	KindConflict = domain.KindConflict
	// KindNotFound is what does not exist or is not the caller's: 404.
	KindNotFound = domain.KindNotFound
	// KindUnauthorized is a missing or invalid credential: 401.
	KindUnauthorized = domain.KindUnauthorized
	// KindForbidden is a valid credential that may not touch the resource: 403.
	KindForbidden = domain.KindForbidden
	// KindRateLimited is a caller over its rate: 429, with Retry-After.
	KindRateLimited = domain.KindRateLimited
	// KindInternal is anything else: 500, without details.
	KindInternal = domain.KindInternal
)

// Kinded is an error of a known kind (one of the Kind constants). Domain
// errors and command results implement it so MapError can map them.
type Kinded interface {
	error
	Kind() string
}

// FieldError is implemented by a validation error that knows which input
// field failed, as a JSON name (budgetCapUsd) or a Huma location
// (body.budgetCapUsd, path.id, query.since).
type FieldError interface {
	Field() string
}

// CurrentStatusError is implemented by a conflict error that knows the
// aggregate's current status (Running, Paused).
type CurrentStatusError interface {
	CurrentStatus() string
}

// RetryAfterError is implemented by a rate-limited error that knows when
// the caller may try again.
type RetryAfterError interface {
	RetryAfter() time.Duration
}

// KindError is a ready-made Kinded error for code that has no domain type
// at hand. Build it with NewKindError and the With methods.
type KindError struct {
	kind          string
	msg           string
	field         string
	currentStatus string
	retryAfter    time.Duration
}

// NewKindError returns an error of kind with the message msg, which is
// shown to the caller.
func NewKindError(kind, msg string) *KindError {
	return &KindError{kind: kind, msg: msg}
}

// WithField returns a copy of e that names the failing input field.
func (e *KindError) WithField(field string) *KindError {
	c := *e
	c.field = field
	return &c
}

// WithCurrentStatus returns a copy of e that carries the aggregate's
// current status.
func (e *KindError) WithCurrentStatus(status string) *KindError {
	c := *e
	c.currentStatus = status
	return &c
}

// WithRetryAfter returns a copy of e that tells when to try again.
func (e *KindError) WithRetryAfter(d time.Duration) *KindError {
	c := *e
	c.retryAfter = d
	return &c
}

// Error returns the message.
func (e *KindError) Error() string { return e.msg }

// Kind returns the error's kind.
func (e *KindError) Kind() string { return e.kind }

// Field returns the failing input field, or "".
func (e *KindError) Field() string { return e.field }

// CurrentStatus returns the aggregate's current status, or "".
func (e *KindError) CurrentStatus() string { return e.currentStatus }

// RetryAfter returns how long the caller should wait, or 0.
func (e *KindError) RetryAfter() time.Duration { return e.retryAfter }

// Problem is the RFC 9457 problem+json body of every error response.
type Problem struct {
	huma.ErrorModel
	// CurrentStatus is the aggregate's status when a transition was refused.
	CurrentStatus string `json:"currentStatus,omitempty" example:"Paused" doc:"For a refused transition (409): the aggregate's current status."`
	// Kind is the error's kind.
	Kind string `json:"kind,omitempty" enum:"validation,conflict,not_found,unauthorized,forbidden,rate_limited,internal" example:"conflict" doc:"The error's kind, stable for programs to switch on."`

	// retryAfter goes into the Retry-After header of a 429.
	retryAfter time.Duration
}

// GetHeaders returns the headers that go with the problem: Retry-After on
// a 429.
func (p *Problem) GetHeaders() http.Header {
	if p.retryAfter <= 0 {
		return nil
	}
	return http.Header{"Retry-After": {retryAfterSeconds(p.retryAfter)}}
}

// init makes Problem the error type of every Huma API in this process, so
// Huma's own errors (validation, malformed JSON) and ours share one shape,
// and an error a handler returns unmapped still goes through MapError.
func init() {
	huma.NewError = newProblem
	huma.NewErrorWithContext = func(ctx huma.Context, status int, msg string, errs ...error) huma.StatusError {
		if status == http.StatusInternalServerError && len(errs) == 1 && errs[0] != nil {
			// A handler returned a plain error: map it by its kind.
			var p *Problem
			if !errors.As(errs[0], &p) {
				p = mapError(ctxOf(ctx), errs[0])
			}
			if ctx != nil && p.retryAfter > 0 {
				ctx.SetHeader("Retry-After", retryAfterSeconds(p.retryAfter))
			}
			return p
		}
		return newProblem(status, msg, errs...)
	}
}

func ctxOf(ctx huma.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx.Context()
}

func newProblem(status int, msg string, errs ...error) huma.StatusError {
	if status >= http.StatusInternalServerError {
		// Never show internals: the log has them.
		for _, err := range errs {
			if err != nil {
				slog.Error("api: internal error", "component", "api", "status", status, "msg", msg, "err", err)
			}
		}
		return newProblemOf(status, KindInternal, msgFor(status, msg))
	}
	p := newProblemOf(status, kindOfStatus(status), msg)
	for _, err := range errs {
		if err == nil {
			continue
		}
		var d huma.ErrorDetailer
		if errors.As(err, &d) {
			p.Errors = append(p.Errors, d.ErrorDetail())
		} else {
			p.Errors = append(p.Errors, &huma.ErrorDetail{Message: err.Error()})
		}
	}
	return p
}

// newProblemOf returns a problem of type about:blank (RFC 9457: the
// status says it all), always written out so clients can rely on it.
func newProblemOf(status int, kind, detail string) *Problem {
	return &Problem{ErrorModel: huma.ErrorModel{Type: "about:blank", Status: status, Title: http.StatusText(status), Detail: detail}, Kind: kind}
}

func msgFor(status int, msg string) string {
	if status == http.StatusInternalServerError {
		return "internal error"
	}
	if msg == "" {
		return http.StatusText(status)
	}
	return msg
}

func kindOfStatus(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return KindValidation
	case http.StatusConflict:
		return KindConflict
	case http.StatusNotFound:
		return KindNotFound
	case http.StatusUnauthorized:
		return KindUnauthorized
	case http.StatusForbidden:
		return KindForbidden
	case http.StatusTooManyRequests:
		return KindRateLimited
	}
	return ""
}

// statusOfKind is the one table from error kind to HTTP status.
var statusOfKind = map[string]int{
	KindValidation:   http.StatusUnprocessableEntity,
	KindConflict:     http.StatusConflict,
	KindNotFound:     http.StatusNotFound,
	KindUnauthorized: http.StatusUnauthorized,
	KindForbidden:    http.StatusForbidden,
	KindRateLimited:  http.StatusTooManyRequests,
}

// MapError turns err into the problem+json error a handler returns: a
// Kinded error (a domain error, a *command.Error, a *KindError) gets its
// kind's status, its message, its field (422, in errors[].location), its
// current status (409, in currentStatus) and its Retry-After (429); an
// error Huma already understands (huma.Error404NotFound(...)) is kept; any
// other error becomes a 500 whose body says nothing about it. nil stays nil.
func MapError(err error) error {
	if err == nil {
		return nil
	}
	var se huma.StatusError
	if errors.As(err, &se) {
		return err
	}
	return mapError(context.Background(), err)
}

func mapError(ctx context.Context, err error) *Problem {
	kind, msg, field, current := KindInternal, "", "", ""
	var retry time.Duration
	if ce, ok := command.AsError(err); ok {
		kind, msg, field, current = ce.Kind, ce.Message, ce.Field, ce.CurrentStatus
	} else {
		var k Kinded
		if errors.As(err, &k) {
			kind, msg = k.Kind(), k.Error()
		}
		var f FieldError
		if errors.As(err, &f) {
			field = f.Field()
		}
		var s CurrentStatusError
		if errors.As(err, &s) {
			current = s.CurrentStatus()
		}
		var r RetryAfterError
		if errors.As(err, &r) {
			retry = r.RetryAfter()
		}
	}
	status, ok := statusOfKind[kind]
	if !ok && databaseUnavailable(err) {
		slog.WarnContext(ctx, "api: database unavailable", "err", err)
		p := newProblemOf(http.StatusServiceUnavailable, KindInternal, "the database is not available; repeat the request shortly")
		p.retryAfter = time.Second
		return p
	}
	if !ok {
		if errors.Is(err, context.Canceled) {
			// Mostly a client that went away, which reads no answer; but
			// one still waiting gets a 500, and the log must say why.
			slog.WarnContext(ctx, "api: request cancelled before its answer", "component", "api", "err", err,
				"request_cancelled", ctx.Err() != nil)
		} else {
			slog.ErrorContext(ctx, "api: internal error", "component", "api", "err", err)
		}
		return newProblemOf(http.StatusInternalServerError, KindInternal, "internal error")
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	p := newProblemOf(status, kind, msg)
	switch kind {
	case KindValidation:
		p.Errors = []*huma.ErrorDetail{{Message: msg, Location: fieldLocation(field)}}
	case KindConflict:
		p.CurrentStatus = current
	case KindRateLimited:
		if retry <= 0 {
			retry = time.Second
		}
		p.retryAfter = retry
	}
	return p
}

// databaseUnavailable reports an error of a database that cannot be
// reached, is starting up or shutting down: the same request may well
// succeed a moment later, so the client is told to repeat it (503) rather
// than that the server failed (500).
func databaseUnavailable(err error) bool {
	var connect *pgconn.ConnectError
	if errors.As(err, &connect) {
		return true
	}
	var pg *pgconn.PgError
	// Class 08: connection exception; 57P: the server is shutting down,
	// starting up or was restarted.
	return errors.As(err, &pg) && (strings.HasPrefix(pg.Code, "08") || strings.HasPrefix(pg.Code, "57P"))
}

// fieldLocation turns a field name into a Huma error location: a bare JSON
// name is a body field.
func fieldLocation(field string) string {
	if field == "" {
		return "body"
	}
	for _, prefix := range []string{"body", "path.", "query.", "header.", "cookie."} {
		if strings.HasPrefix(field, prefix) {
			return field
		}
	}
	return "body." + field
}

func retryAfterSeconds(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}
