package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/command"
)

// domainError is how a domain package's typed error looks to the API.
type domainError struct {
	kind, msg, field, status string
}

func (e domainError) Error() string         { return e.msg }
func (e domainError) Kind() string          { return e.kind }
func (e domainError) Field() string         { return e.field }
func (e domainError) CurrentStatus() string { return e.status }

type failInput struct {
	Case string `query:"case" doc:"Which error to return." example:"conflict"`
}

type failOutput struct {
	Body struct {
		OK bool `json:"ok" doc:"Always true." example:"true"`
	}
}

type createInput struct {
	Body struct {
		Name  string `json:"name" maxLength:"5" doc:"A short name." example:"alice"`
		Count int    `json:"count" minimum:"1" doc:"How many." example:"2"`
	}
}

func TestErrorMapping(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{}, Deps{})
	// A real connection failure: nothing listens on port 1 of loopback.
	_, unreachable := pgconn.Connect(context.Background(), "postgres://agentbus:hunter2@127.0.0.1:1/agentbus?connect_timeout=5")
	require.Error(t, unreachable)
	errs := map[string]error{
		"validation":      NewKindError(KindValidation, "objective must not be empty").WithField("objective"),
		"validationQuery": NewKindError(KindValidation, "bad since").WithField("query.since"),
		"conflict":        domainError{kind: KindConflict, msg: "cannot pause a Paused session", status: "Paused"},
		"wrappedConflict": fmt.Errorf("pause: %w", domainError{kind: KindConflict, msg: "cannot pause", status: "Completed"}),
		"notFound":        domainError{kind: KindNotFound, msg: "session not found"},
		"unauthorized":    NewKindError(KindUnauthorized, "who are you"),
		"forbidden":       NewKindError(KindForbidden, "not your session"),
		"rateLimited":     NewKindError(KindRateLimited, "slow down").WithRetryAfter(2500 * time.Millisecond),
		"commandResult":   fmt.Errorf("send: %w", &command.Error{Kind: command.KindConflict, Message: "session is Running", CurrentStatus: "Running"}),
		"commandInvalid":  &command.Error{Kind: command.KindValidation, Message: "too long", Field: "content"},
		"commandInternal": &command.Error{Kind: command.KindInternal, Message: "db password is hunter2"},
		"huma":            huma.Error404NotFound("no such template"),
		"plain":           errors.New("dial tcp 10.0.0.7:5432: password authentication failed for user agentbus"),
		"unknownKind":     domainError{kind: "weird", msg: "secret detail"},
		"dbUnreachable":   fmt.Errorf("queries: session: %w", unreachable),
		"dbStarting":      fmt.Errorf("claim: %w", &pgconn.PgError{Code: "57P03", Message: "the database system is starting up"}),
		"dbConstraint":    &pgconn.PgError{Code: "23505", Message: "duplicate key value violates unique constraint"},
	}
	register(s.API(), huma.Operation{
		OperationID: "test-fail", Method: http.MethodGet, Path: "/test/fail", Summary: "Fail", Tags: []string{"Test"},
	}, func(_ context.Context, in *failInput) (*failOutput, error) {
		return nil, errs[in.Case]
	})
	// A handler registered without register: its plain errors are mapped too.
	huma.Register(s.API(), huma.Operation{
		OperationID: "test-fail-raw", Method: http.MethodGet, Path: "/test/fail-raw", Summary: "Fail", Tags: []string{"Test"},
	}, func(_ context.Context, in *failInput) (*failOutput, error) {
		return nil, errs[in.Case]
	})
	api := testAPI(t, s)

	tests := []struct {
		name       string
		status     int
		kind       string
		detail     string
		location   string
		current    string
		retryAfter string
	}{
		{name: "validation", status: 422, kind: "validation", detail: "objective must not be empty", location: "body.objective"},
		{name: "validationQuery", status: 422, kind: "validation", location: "query.since"},
		{name: "conflict", status: 409, kind: "conflict", detail: "cannot pause a Paused session", current: "Paused"},
		{name: "wrappedConflict", status: 409, kind: "conflict", current: "Completed"},
		{name: "notFound", status: 404, kind: "not_found", detail: "session not found"},
		{name: "unauthorized", status: 401, kind: "unauthorized"},
		{name: "forbidden", status: 403, kind: "forbidden"},
		{name: "rateLimited", status: 429, kind: "rate_limited", retryAfter: "3"},
		{name: "commandResult", status: 409, kind: "conflict", detail: "session is Running", current: "Running"},
		{name: "commandInvalid", status: 422, kind: "validation", location: "body.content"},
		{name: "commandInternal", status: 500, kind: "internal", detail: "internal error"},
		{name: "huma", status: 404, kind: "not_found", detail: "no such template"},
		{name: "plain", status: 500, kind: "internal", detail: "internal error"},
		{name: "unknownKind", status: 500, kind: "internal", detail: "internal error"},
		{name: "dbUnreachable", status: 503, kind: "internal", detail: "the database is not available; repeat the request shortly", retryAfter: "1"},
		{name: "dbStarting", status: 503, kind: "internal", detail: "the database is not available; repeat the request shortly", retryAfter: "1"},
		{name: "dbConstraint", status: 500, kind: "internal", detail: "internal error"},
	}
	for _, path := range []string{"/test/fail", "/test/fail-raw"} {
		for _, tt := range tests {
			t.Run(strings.TrimPrefix(path, "/test/")+"/"+tt.name, func(t *testing.T) {
				resp := api.Get(path + "?case=" + tt.name)
				require.Equal(t, tt.status, resp.Code, resp.Body.String())
				assert.Equal(t, "application/problem+json", resp.Header().Get("Content-Type"))
				p := decodeProblem(t, resp.Body.Bytes())
				assert.EqualValues(t, tt.status, p["status"])
				assert.Equal(t, http.StatusText(tt.status), p["title"])
				assert.Equal(t, tt.kind, p["kind"])
				if tt.detail != "" {
					assert.Equal(t, tt.detail, p["detail"])
				}
				if tt.location != "" {
					require.NotEmpty(t, p["errors"])
					assert.Equal(t, tt.location, p["errors"].([]any)[0].(map[string]any)["location"])
				}
				if tt.current != "" {
					assert.Equal(t, tt.current, p["currentStatus"])
				} else {
					assert.NotContains(t, p, "currentStatus")
				}
				assert.Equal(t, tt.retryAfter, resp.Header().Get("Retry-After"))
				// Nothing of an internal error reaches the caller.
				for _, leak := range []string{"hunter2", "10.0.0.7", "password", "secret detail"} {
					assert.NotContains(t, resp.Body.String(), leak)
				}
			})
		}
	}
}

func TestMalformedInput(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{}, Deps{})
	register(s.API(), huma.Operation{
		OperationID: "test-create", Method: http.MethodPost, Path: "/test/things", Summary: "Create", Tags: []string{"Test"},
	}, func(_ context.Context, in *createInput) (*failOutput, error) {
		out := &failOutput{}
		out.Body.OK = true
		return out, nil
	})
	api := testAPI(t, s)

	tests := []struct {
		name     string
		body     string
		status   int
		location string
	}{
		{name: "truncated JSON", body: `{"name": "al`, status: 400},
		{name: "not JSON", body: `name=alice`, status: 400},
		{name: "wrong type", body: `{"name": "al", "count": "two"}`, status: 422, location: "body.count"},
		{name: "too long", body: `{"name": "alexander", "count": 1}`, status: 422, location: "body.name"},
		{name: "below minimum", body: `{"name": "al", "count": 0}`, status: 422, location: "body.count"},
		{name: "missing field", body: `{"name": "al"}`, status: 422, location: "body"},
		{name: "valid", body: `{"name": "al", "count": 1}`, status: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := api.Post("/test/things", "Content-Type: application/json", strings.NewReader(tt.body))
			require.Equal(t, tt.status, resp.Code, resp.Body.String())
			if tt.status < 400 {
				return
			}
			assert.Equal(t, "application/problem+json", resp.Header().Get("Content-Type"))
			p := decodeProblem(t, resp.Body.Bytes())
			assert.Equal(t, "validation", p["kind"])
			assert.NotEmpty(t, p["detail"])
			if tt.location != "" {
				require.NotEmpty(t, p["errors"], resp.Body.String())
				var locations []string
				for _, e := range p["errors"].([]any) {
					locations = append(locations, e.(map[string]any)["location"].(string))
				}
				assert.Contains(t, locations, tt.location)
				assert.NotEmpty(t, p["errors"].([]any)[0].(map[string]any)["message"])
			}
		})
	}
}

func TestMapErrorKeepsNil(t *testing.T) {
	t.Parallel()
	assert.NoError(t, MapError(nil))
}
