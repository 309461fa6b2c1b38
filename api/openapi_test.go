package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServedDocuments(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{}, Deps{})
	api := testAPI(t, s)

	resp := api.Get("/openapi.json")
	require.Equal(t, 200, resp.Code)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(resp.Body.Bytes(), &doc))
	assert.Equal(t, "3.1.0", doc["openapi"])
	schemes := doc["components"].(map[string]any)["securitySchemes"].(map[string]any)
	assert.Equal(t, map[string]any{"type": "http", "scheme": "bearer", "bearerFormat": "JWT", "description": schemes["bearer"].(map[string]any)["description"]}, schemes["bearer"])
	assert.Equal(t, "apiKey", schemes["agentKey"].(map[string]any)["type"])
	assert.Equal(t, "header", schemes["agentKey"].(map[string]any)["in"])
	assert.Equal(t, AgentKeyHeader, schemes["agentKey"].(map[string]any)["name"])

	fromCmd, err := OpenAPIDocument(Config{})
	require.NoError(t, err)
	assert.JSONEq(t, resp.Body.String(), string(fromCmd), "agentbus openapi prints the served document")

	assert.Equal(t, 200, api.Get("/openapi.yaml").Code)
	docs := api.Get("/docs")
	require.Equal(t, 200, docs.Code)
	assert.Contains(t, docs.Body.String(), "openapi")
	assert.Equal(t, 200, api.Get("/healthz").Code)
	assert.Equal(t, 200, api.Get("/readyz").Code)

	for path, status := range map[string]int{"GET /nope": 404, "DELETE /api/agents/stream": 405} {
		method, target, _ := strings.Cut(path, " ")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
		require.Equal(t, status, rec.Code, path)
		assert.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"), path)
		assert.EqualValues(t, status, decodeProblem(t, rec.Body.Bytes())["status"], path)
	}
}

// TestOpenAPIConventions holds every operation to the conventions of
// DESIGN.md section 5, including operations added later: a summary, tags,
// documented parameters with examples, a described and exemplified field
// for every property, lowerCamelCase JSON names, problem+json errors and an
// Idempotency-Key on every command.
func TestOpenAPIConventions(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{}, Deps{})
	oapi := s.API().OpenAPI()
	require.NotEmpty(t, oapi.Paths)

	for path, item := range oapi.Paths {
		for method, op := range map[string]*huma.Operation{
			"GET": item.Get, "POST": item.Post, "PUT": item.Put, "PATCH": item.Patch, "DELETE": item.Delete,
		} {
			if op == nil {
				continue
			}
			name := method + " " + path
			assert.NotEmpty(t, op.OperationID, name)
			assert.NotEmpty(t, op.Summary, name)
			assert.NotEmpty(t, op.Tags, name)
			if strings.HasPrefix(path, "/api/agents/") {
				assert.Equal(t, HumanAuth, op.Security, "%s: people's endpoints take a JWT", name)
			}
			if strings.HasPrefix(path, "/api/agent/") {
				assert.Equal(t, AgentAuth, op.Security, "%s: agents' endpoints take an agent key", name)
			}
			hasIdem := false
			for _, p := range op.Parameters {
				assert.NotEmpty(t, p.Description, "%s: parameter %s has no description", name, p.Name)
				assert.True(t, p.Example != nil || (p.Schema != nil && len(p.Schema.Examples) > 0) || len(p.Examples) > 0,
					"%s: parameter %s has no example", name, p.Name)
				hasIdem = hasIdem || p.Name == IdempotencyKeyHeader
			}
			assert.Equal(t, isCommand(method), hasIdem, "%s: Idempotency-Key on commands only", name)
			for code, r := range op.Responses {
				if code[0] == '4' || code[0] == '5' {
					assert.Contains(t, r.Content, "application/problem+json", "%s %s", name, code)
				}
			}
			if len(op.Security) > 0 {
				assert.Contains(t, op.Responses, "401", name)
			}
		}
	}

	names := make([]string, 0)
	for name := range oapi.Components.Schemas.Map() {
		names = append(names, name)
	}
	sort.Strings(names)
	// The payloads of the domain events on the live streams are the
	// domain's own types, described by the event catalogue of
	// docs/DESIGN.md; their variants in StreamEvent are documented.
	payloads := map[string]bool{}
	for _, v := range oapi.Components.Schemas.Map()[streamEventSchemaName].OneOf {
		variant := oapi.Components.Schemas.Map()[strings.TrimPrefix(v.Ref, schemaRef)]
		require.NotNil(t, variant, v.Ref)
		payloads[strings.TrimPrefix(variant.Properties["data"].Ref, schemaRef)] = true
	}
	require.NotEmpty(t, payloads)
	for _, name := range names {
		if payloads[name] {
			continue
		}
		checkSchema(t, name, oapi.Components.Schemas.Map()[name])
	}
}

func checkSchema(t *testing.T, name string, sch *huma.Schema) {
	t.Helper()
	for prop, p := range sch.Properties {
		where := name + "." + prop
		if prop != "$schema" {
			assert.Regexp(t, `^[a-z][a-zA-Z0-9]*$`, prop, "%s: JSON names are lowerCamelCase", where)
		}
		assert.NotEmpty(t, p.Description, "%s has no doc", where)
		if p.Ref == "" && p.Type != huma.TypeObject && p.Type != huma.TypeArray {
			assert.True(t, len(p.Examples) > 0, "%s has no example", where)
		}
	}
}

func TestEveryOperationDocumentsItsErrors(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{}, Deps{})
	addAuthTestRoutes(s)
	register(s.API(), huma.Operation{
		OperationID: "test-agent-post", Method: http.MethodPost, Path: "/test/agent/sessions/{id}/output", Summary: "Output", Tags: []string{"Test"},
		Security: AgentAuth,
	}, func(_ context.Context, _ *whoInput) (*struct{}, error) { return nil, nil })
	op := s.API().OpenAPI().Paths["/test/agent/sessions/{id}/output"].Post
	for _, code := range []string{"401", "403", "409", "422", "500"} {
		assert.Contains(t, op.Responses, code)
	}
	get := s.API().OpenAPI().Paths["/test/me"].Get
	assert.Contains(t, get.Responses, "401")
	assert.NotContains(t, get.Responses, "409")
	assert.NotContains(t, get.Responses, "default")
}

func TestRegisterChecksConventions(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{}, Deps{})
	assert.Panics(t, func() {
		register(s.API(), huma.Operation{OperationID: "x", Method: http.MethodGet, Path: "/x", Tags: []string{"T"}},
			func(_ context.Context, _ *struct{}) (*struct{}, error) { return nil, nil })
	}, "no summary")
	assert.Panics(t, func() {
		register(s.API(), huma.Operation{OperationID: "y", Method: http.MethodGet, Path: "/y", Summary: "Y"},
			func(_ context.Context, _ *struct{}) (*struct{}, error) { return nil, nil })
	}, "no tags")
}
