package api

import (
	"encoding/json"
	"errors"
	"net/http"
)

// Doors other than HTTP operations (the WebSocket of doors/ws) are served
// by the API's mux and authenticate as its operations do.

// Handle serves h at pattern (a net/http ServeMux pattern) beside the
// operations, for a door that is not an OpenAPI operation.
func (s *Server) Handle(pattern string, h http.Handler) {
	s.mux.Handle(pattern, h)
}

// AuthenticateBearer checks an Authorization header as every operation
// for people does and returns the caller's owner id; the error is of kind
// unauthorized.
func (s *Server) AuthenticateBearer(header string) (string, error) {
	if header == "" {
		return "", NewKindError(KindUnauthorized, "missing credentials: Authorization: Bearer <token>")
	}
	p, err := s.authenticateBearer(header)
	if err != nil {
		return "", err
	}
	return p.OwnerID, nil
}

// WriteProblem writes err as the problem+json response the operations
// give for it.
func WriteProblem(w http.ResponseWriter, err error) {
	var p *Problem
	if !errors.As(MapError(err), &p) {
		p = newProblemOf(http.StatusInternalServerError, KindInternal, "internal error")
	}
	for k, v := range p.GetHeaders() {
		w.Header()[k] = v
	}
	if p.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agentbus"`)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}
