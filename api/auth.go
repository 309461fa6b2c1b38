package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/danielgtaylor/huma/v2"
	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
)

// Security scheme names in the OpenAPI document. An operation lists the
// ones it accepts in its Security field; the authentication middleware
// enforces them.
const (
	// SchemeBearer is a person's JWT in `Authorization: Bearer <token>`.
	SchemeBearer = "bearer"
	// SchemeAgentKey is a session's agent API key in the X-Agent-Key header.
	SchemeAgentKey = "agentKey"
)

// AgentKeyHeader is the header that carries an agent API key.
const AgentKeyHeader = "X-Agent-Key"

// Security requirements to put in an operation's Security field.
var (
	// HumanAuth requires a person's bearer JWT.
	HumanAuth = []map[string][]string{{SchemeBearer: {}}}
	// AgentAuth requires a session's agent API key.
	AgentAuth = []map[string][]string{{SchemeAgentKey: {}}}
)

// AgentKeys finds the session an agent API key belongs to. The API hands it
// only the key's SHA-256 hash; an implementation that compares hashes
// itself uses AgentKeyMatches (constant time).
type AgentKeys interface {
	// LookupSession returns the session whose key has the hash keyHash and
	// that session's owner. It returns ErrUnknownAgentKey, or an error of
	// kind not_found or unauthorized, when no session has that key.
	LookupSession(ctx context.Context, keyHash [32]byte) (sessionID uuid.UUID, ownerID string, err error)
}

// ErrUnknownAgentKey is returned by AgentKeys when no session has the key.
var ErrUnknownAgentKey = errors.New("unknown agent key")

// HashAgentKey returns the SHA-256 hash under which a session's agent API
// key is stored.
func HashAgentKey(key string) [32]byte {
	return sha256.Sum256([]byte(key))
}

// AgentKeyMatches reports, in constant time, whether key hashes to stored.
func AgentKeyMatches(stored []byte, key string) bool {
	h := HashAgentKey(key)
	return subtle.ConstantTimeCompare(stored, h[:]) == 1
}

// Principal is the authenticated caller of a request.
type Principal struct {
	// OwnerID is the person the request acts for: the JWT's sub, or the
	// owner of the agent's session.
	OwnerID string
	// SessionID is the agent's session; uuid.Nil for a person.
	SessionID uuid.UUID
}

// IsAgent reports whether the caller is an agent (authenticated by its
// session's API key) rather than a person.
func (p Principal) IsAgent() bool { return p.SessionID != uuid.Nil }

// scope names the caller in keys that must never mix two callers.
func (p Principal) scope() string {
	if p.IsAgent() {
		return "agent:" + p.SessionID.String()
	}
	return "user:" + p.OwnerID
}

type principalKey struct{}

// WithPrincipal returns a context that carries p, as the authentication
// middleware does; tests of handlers use it too.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the authenticated caller of the request ctx
// belongs to; ok is false on an operation without security.
func PrincipalFrom(ctx context.Context) (p Principal, ok bool) {
	p, ok = ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// OwnerID returns the owner id every query and command of the request is
// scoped to, or "" on an operation without security.
func OwnerID(ctx context.Context) string {
	p, _ := PrincipalFrom(ctx)
	return p.OwnerID
}

// RequireSession returns a forbidden error when the caller is an agent of
// another session than id; people pass (their scope is their owner id).
func RequireSession(ctx context.Context, id uuid.UUID) error {
	p, ok := PrincipalFrom(ctx)
	if !ok {
		return NewKindError(KindUnauthorized, "authentication required")
	}
	if p.IsAgent() && p.SessionID != id {
		return NewKindError(KindForbidden, "an agent key may only touch its own session")
	}
	return nil
}

// tokenVerifier checks people's bearer JWTs.
type tokenVerifier struct {
	keyfunc jwt.Keyfunc
	parser  *jwt.Parser
	// now is the parser's clock, which the verified tokens are held to.
	now func() time.Time
	// verified remembers the tokens a fixed secret verified (nil with a
	// JWKS, whose keys may be withdrawn).
	verified *verifiedTokens
}

// jwksMethods are the signing methods accepted from a JWKS: asymmetric only,
// so a public key can never be used as an HMAC secret.
var jwksMethods = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// newTokenVerifier builds the verifier cfg asks for. With a JWKS URL the
// keys are fetched and refreshed in the background until ctx ends.
func newTokenVerifier(ctx context.Context, cfg Config) (*tokenVerifier, error) {
	return newTokenVerifierAt(ctx, cfg, time.Now)
}

func newTokenVerifierAt(ctx context.Context, cfg Config, now func() time.Time) (*tokenVerifier, error) {
	opts := []jwt.ParserOption{jwt.WithExpirationRequired(), jwt.WithLeeway(jwtLeeway), jwt.WithTimeFunc(now)}
	if cfg.JWTIssuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.JWTIssuer))
	}
	if cfg.JWTAudience != "" {
		opts = append(opts, jwt.WithAudience(cfg.JWTAudience))
	}
	if cfg.JWKSURL != "" {
		k, err := keyfunc.NewDefaultCtx(ctx, []string{cfg.JWKSURL})
		if err != nil {
			return nil, fmt.Errorf("api: jwks %s: %w", cfg.JWKSURL, err)
		}
		opts = append(opts, jwt.WithValidMethods(jwksMethods))
		return &tokenVerifier{keyfunc: k.Keyfunc, parser: jwt.NewParser(opts...), now: now}, nil
	}
	secret := []byte(cfg.JWTSecret)
	opts = append(opts, jwt.WithValidMethods([]string{"HS256"}))
	return &tokenVerifier{
		keyfunc:  func(*jwt.Token) (any, error) { return secret, nil },
		parser:   jwt.NewParser(opts...),
		now:      now,
		verified: &verifiedTokens{byToken: map[string]verifiedToken{}},
	}, nil
}

// verify returns the owner id (sub) of a valid token.
func (v *tokenVerifier) verify(raw string) (string, error) {
	if v.verified != nil {
		if sub, ok := v.verified.lookup(raw, v.now()); ok {
			return sub, nil
		}
	}
	var claims jwt.RegisteredClaims
	if _, err := v.parser.ParseWithClaims(raw, &claims, v.keyfunc); err != nil {
		return "", err
	}
	if claims.Subject == "" {
		return "", errors.New("token has no sub")
	}
	v.verified.remember(raw, claims)
	return claims.Subject, nil
}

// maxVerifiedTokens bounds the tokens remembered; past it they are
// forgotten together and verified again as they come back.
const maxVerifiedTokens = 4096

// verifiedTokens remembers the tokens a fixed secret verified, so a
// client's next request with the same token skips the signature and the
// decoding: with the same secret the same bytes verify the same way, and
// only the times they carry are checked again, as the parser does (its
// leeway included). Only verified tokens are kept, each under its own
// bytes.
type verifiedTokens struct {
	mu      sync.RWMutex
	byToken map[string]verifiedToken
}

type verifiedToken struct {
	sub       string
	expiresAt time.Time
	notBefore time.Time // zero when the token has none
}

func (c *verifiedTokens) lookup(raw string, now time.Time) (string, bool) {
	c.mu.RLock()
	t, ok := c.byToken[raw]
	c.mu.RUnlock()
	if !ok || !now.Before(t.expiresAt.Add(jwtLeeway)) || (!t.notBefore.IsZero() && now.Add(jwtLeeway).Before(t.notBefore)) {
		// An expired token is verified again, and refused with the
		// parser's own reason.
		return "", false
	}
	return t.sub, true
}

func (c *verifiedTokens) remember(raw string, claims jwt.RegisteredClaims) {
	if c == nil || claims.ExpiresAt == nil {
		return
	}
	t := verifiedToken{sub: claims.Subject, expiresAt: claims.ExpiresAt.Time}
	if claims.NotBefore != nil {
		t.notBefore = claims.NotBefore.Time
	}
	c.mu.Lock()
	if len(c.byToken) >= maxVerifiedTokens {
		clear(c.byToken)
	}
	c.byToken[raw] = t
	c.mu.Unlock()
}

// authenticate is the middleware that enforces each operation's security
// requirements: an operation without any is public; otherwise the caller
// must present a valid credential of a scheme the operation lists (401),
// and an agent may only reach its own session's {id} (403).
func (s *Server) authenticate(ctx huma.Context, next func(huma.Context)) {
	op := ctx.Operation()
	if op == nil || len(op.Security) == 0 {
		next(ctx)
		return
	}
	accepts := map[string]bool{}
	for _, req := range op.Security {
		for name := range req {
			accepts[name] = true
		}
	}
	var (
		p   Principal
		err error
		got bool
	)
	if accepts[SchemeBearer] {
		if h := ctx.Header("Authorization"); h != "" {
			got = true
			p, err = s.authenticateBearer(h)
		}
	}
	if !got && accepts[SchemeAgentKey] {
		if k := ctx.Header(AgentKeyHeader); k != "" {
			got = true
			p, err = s.authenticateAgent(ctx.Context(), k)
		}
	}
	if !got {
		err = NewKindError(KindUnauthorized, "missing credentials: "+expected(accepts))
	}
	if err == nil && p.IsAgent() && strings.Contains(op.Path, "{id}") {
		if id, perr := uuid.Parse(ctx.Param("id")); perr != nil || id != p.SessionID {
			err = NewKindError(KindForbidden, "an agent key may only touch its own session")
		}
	}
	if err != nil {
		if accepts[SchemeBearer] {
			ctx.SetHeader("WWW-Authenticate", `Bearer realm="agentbus"`)
		}
		s.writeError(ctx, err)
		return
	}
	ctx = huma.WithValue(ctx, principalKey{}, p)
	next(ctx)
}

func expected(accepts map[string]bool) string {
	var parts []string
	if accepts[SchemeBearer] {
		parts = append(parts, "Authorization: Bearer <token>")
	}
	if accepts[SchemeAgentKey] {
		parts = append(parts, AgentKeyHeader+": <agent key>")
	}
	return strings.Join(parts, " or ")
}

func (s *Server) authenticateBearer(header string) (Principal, error) {
	raw, ok := strings.CutPrefix(header, "Bearer ")
	if !ok {
		raw, ok = strings.CutPrefix(header, "bearer ")
	}
	if !ok || strings.TrimSpace(raw) == "" {
		return Principal{}, NewKindError(KindUnauthorized, "the Authorization header must be `Bearer <token>`")
	}
	sub, err := s.tokens.verify(strings.TrimSpace(raw))
	if err != nil {
		return Principal{}, NewKindError(KindUnauthorized, "invalid token: "+err.Error())
	}
	return Principal{OwnerID: sub}, nil
}

func (s *Server) authenticateAgent(ctx context.Context, key string) (Principal, error) {
	if s.deps.AgentKeys == nil {
		return Principal{}, NewKindError(KindUnauthorized, "agent keys are not accepted by this server")
	}
	id, owner, err := s.deps.AgentKeys.LookupSession(ctx, HashAgentKey(key))
	if err != nil {
		var k Kinded
		if errors.Is(err, ErrUnknownAgentKey) || (errors.As(err, &k) && (k.Kind() == KindNotFound || k.Kind() == KindUnauthorized)) {
			return Principal{}, NewKindError(KindUnauthorized, "invalid agent key")
		}
		return Principal{}, err
	}
	if id == uuid.Nil {
		return Principal{}, NewKindError(KindUnauthorized, "invalid agent key")
	}
	return Principal{OwnerID: owner, SessionID: id}, nil
}

// writeError writes err, mapped by MapError, as the response.
func (s *Server) writeError(ctx huma.Context, err error) {
	var p *Problem
	if !errors.As(MapError(err), &p) {
		var se huma.StatusError
		if errors.As(err, &se) {
			_ = huma.WriteErr(s.api, ctx, se.GetStatus(), se.Error())
			return
		}
		p = mapError(ctx.Context(), err)
	}
	for k, v := range p.GetHeaders() {
		for _, vv := range v {
			ctx.AppendHeader(k, vv)
		}
	}
	ctx.SetHeader("Content-Type", "application/problem+json")
	ctx.SetStatus(p.Status)
	_ = s.api.Marshal(ctx.BodyWriter(), "application/json", p)
}

// securitySchemes declares both schemes in the OpenAPI document.
func securitySchemes() map[string]*huma.SecurityScheme {
	return map[string]*huma.SecurityScheme{
		SchemeBearer: {
			Type:         "http",
			Scheme:       "bearer",
			BearerFormat: "JWT",
			Description:  "A person's JWT; its `sub` is the owner id every query and command is scoped to. `agentbus token --user <id>` prints a development token.",
		},
		SchemeAgentKey: {
			Type:        "apiKey",
			In:          "header",
			Name:        AgentKeyHeader,
			Description: "A session's agent API key, returned once when the session starts. It reaches only that session.",
		},
	}
}

// unauthorizedStatus and forbiddenStatus are listed on secured operations.
var (
	humanErrors = []int{http.StatusUnauthorized}
	agentErrors = []int{http.StatusUnauthorized, http.StatusForbidden}
)
