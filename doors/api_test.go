package doors

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestErrorOfReadsTheAPIsProblem(t *testing.T) {
	e := ErrorOf(Response{Status: http.StatusUnprocessableEntity, Header: http.Header{},
		Body: []byte(`{"status":422,"detail":"validation failed","kind":"validation","errors":[{"location":"body.objective","message":"expected length >= 1"}]}`)})
	assert.Equal(t, &Error{Kind: "validation", Message: "validation failed: expected length >= 1", Status: 422, Field: "body.objective"}, e)

	e = ErrorOf(Response{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"2"}},
		Body: []byte(`{"status":429,"detail":"slow down","kind":"rate_limited"}`)})
	assert.Equal(t, 2, e.RetryAfterSeconds)
	assert.Equal(t, "rate_limited", e.Kind)

	e = ErrorOf(Response{Status: http.StatusBadGateway, Header: http.Header{}, Body: []byte("not json")})
	assert.Equal(t, KindInternal, e.Kind, "an answer that is no problem is internal")
	assert.Equal(t, "Bad Gateway", e.Message)
}
