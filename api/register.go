package api

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/sse"
)

// register adds an operation whose handler's errors go through MapError,
// after checking the conventions every operation keeps (an id, a summary
// and tags). Endpoints register through it.
func register[I, O any](api huma.API, op huma.Operation, handler func(context.Context, *I) (*O, error)) {
	checkOperation(op)
	huma.Register(api, op, func(ctx context.Context, in *I) (*O, error) {
		out, err := handler(ctx, in)
		if err != nil {
			return nil, MapError(err)
		}
		return out, nil
	})
}

// registerSSE adds a Server-Sent Events operation; see sse.Register.
func registerSSE[I any](api huma.API, op huma.Operation, events map[string]any, f func(context.Context, *I, sse.Sender)) {
	checkOperation(op)
	sse.Register(api, op, events, f)
}

func checkOperation(op huma.Operation) {
	if op.OperationID == "" || op.Summary == "" || len(op.Tags) == 0 {
		panic(fmt.Sprintf("api: operation %s %s needs an OperationID, a Summary and Tags", op.Method, op.Path))
	}
}

// documentOperation completes every operation's document with what the
// middlewares do: the Idempotency-Key header of commands, and the error
// responses of authentication, idempotency and validation.
func documentOperation(oapi *huma.OpenAPI, op *huma.Operation) {
	var codes []int
	if len(op.Security) > 0 {
		codes = append(codes, http.StatusUnauthorized)
		for _, req := range op.Security {
			if _, ok := req[SchemeAgentKey]; ok {
				codes = append(codes, http.StatusForbidden)
			}
		}
	}
	if isCommand(op.Method) {
		op.Parameters = append(op.Parameters, &huma.Param{
			Name: IdempotencyKeyHeader,
			In:   "header",
			Description: "Makes the command safe to repeat: a repeat with the same key (same caller, method and path) " +
				"returns the first response and changes nothing. Remembered for 24 hours.",
			Schema:  &huma.Schema{Type: huma.TypeString, MaxLength: ptr(maxIdempotencyKey), Description: "A unique key chosen by the client, such as a UUID."},
			Example: "6f1c2b0e-3d4a-4e5f-8a9b-0c1d2e3f4a5b",
		})
		codes = append(codes, http.StatusConflict, http.StatusUnprocessableEntity)
	}
	codes = append(codes, http.StatusInternalServerError)
	errSchema := oapi.Components.Schemas.Schema(problemType, true, "Problem")
	if op.Responses == nil {
		op.Responses = map[string]*huma.Response{}
	}
	for _, code := range codes {
		key := strconv.Itoa(code)
		if _, ok := op.Responses[key]; ok {
			continue
		}
		op.Responses[key] = &huma.Response{
			Description: http.StatusText(code),
			Content:     map[string]*huma.MediaType{"application/problem+json": {Schema: errSchema}},
		}
		if !slices.Contains(op.Errors, code) {
			op.Errors = append(op.Errors, code)
		}
	}
	if r, ok := op.Responses[strconv.Itoa(http.StatusTooManyRequests)]; ok {
		if r.Headers == nil {
			r.Headers = map[string]*huma.Header{}
		}
		r.Headers["Retry-After"] = &huma.Header{
			Description: "Seconds to wait before trying again.",
			Schema:      &huma.Schema{Type: huma.TypeInteger, Description: "Seconds to wait before trying again.", Examples: []any{2}},
		}
	}
	// Drop Huma's catch-all once the errors are listed.
	if len(op.Responses) > 2 {
		delete(op.Responses, "default")
	}
	exemplifyErrorDetail(oapi)
}

// exemplifyErrorDetail gives the fields of Huma's ErrorDetail (the items
// of a problem's errors) the examples every field of the document has.
func exemplifyErrorDetail(oapi *huma.OpenAPI) {
	d := oapi.Components.Schemas.Map()["ErrorDetail"]
	if d == nil {
		return
	}
	examples := map[string]any{"message": "expected length <= 2000", "location": "body.objective", "value": "a very long objective"}
	for name, example := range examples {
		if p := d.Properties[name]; p != nil && len(p.Examples) == 0 {
			p.Examples = []any{example}
		}
	}
}

var problemType = reflect.TypeFor[Problem]()

func ptr[T any](v T) *T { return &v }
