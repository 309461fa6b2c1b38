package api

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeAgentKeys knows one key per session.
type fakeAgentKeys struct {
	sessions map[[32]byte]Principal
	err      error
}

func (f fakeAgentKeys) LookupSession(_ context.Context, h [32]byte) (uuid.UUID, string, error) {
	if f.err != nil {
		return uuid.Nil, "", f.err
	}
	p, ok := f.sessions[h]
	if !ok {
		return uuid.Nil, "", ErrUnknownAgentKey
	}
	return p.SessionID, p.OwnerID, nil
}

type whoInput struct {
	ID string `path:"id" doc:"A session id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
}

type whoOutput struct {
	Body struct {
		OwnerID   string `json:"ownerId" doc:"The caller's owner id." example:"alice"`
		SessionID string `json:"sessionId,omitempty" doc:"The agent's session." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	}
}

func who(ctx context.Context) *whoOutput {
	p, _ := PrincipalFrom(ctx)
	out := &whoOutput{}
	out.Body.OwnerID = OwnerID(ctx)
	if p.IsAgent() {
		out.Body.SessionID = p.SessionID.String()
	}
	return out
}

// addAuthTestRoutes registers a human, an agent-per-session and an agent
// operation.
func addAuthTestRoutes(s *Server) {
	register(s.API(), huma.Operation{
		OperationID: "test-me", Method: http.MethodGet, Path: "/test/me", Summary: "Me", Tags: []string{"Test"},
		Security: HumanAuth,
	}, func(ctx context.Context, _ *struct{}) (*whoOutput, error) { return who(ctx), nil })
	register(s.API(), huma.Operation{
		OperationID: "test-agent-log", Method: http.MethodGet, Path: "/test/agent/sessions/{id}/log", Summary: "Log", Tags: []string{"Test"},
		Security: AgentAuth,
	}, func(ctx context.Context, _ *whoInput) (*whoOutput, error) { return who(ctx), nil })
	register(s.API(), huma.Operation{
		OperationID: "test-agent-tasks", Method: http.MethodGet, Path: "/test/agent/tasks", Summary: "Tasks", Tags: []string{"Test"},
		Security: AgentAuth,
	}, func(ctx context.Context, _ *struct{}) (*whoOutput, error) { return who(ctx), nil })
	register(s.API(), huma.Operation{
		OperationID: "test-public", Method: http.MethodGet, Path: "/test/public", Summary: "Public", Tags: []string{"Test"},
	}, func(ctx context.Context, _ *struct{}) (*whoOutput, error) { return who(ctx), nil })
}

func signed(t *testing.T, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(method, claims).SignedString(key)
	require.NoError(t, err)
	return "Authorization: Bearer " + tok
}

func TestBearerAuth(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{}, Deps{})
	addAuthTestRoutes(s)
	api := testAPI(t, s)
	now := time.Now()
	valid := jwt.MapClaims{"sub": "alice", "exp": now.Add(time.Hour).Unix()}

	tests := []struct {
		name   string
		header []any
		status int
		owner  string
	}{
		{name: "valid token", header: []any{bearer(t, "alice")}, status: 200, owner: "alice"},
		{name: "lowercase scheme", header: []any{"Authorization: bearer " + bearer(t, "bob")[len("Authorization: Bearer "):]}, status: 200, owner: "bob"},
		{name: "no credentials", status: 401},
		{name: "not bearer", header: []any{"Authorization: Basic YWxpY2U6c2VjcmV0"}, status: 401},
		{name: "garbage", header: []any{"Authorization: Bearer not.a.jwt"}, status: 401},
		{name: "wrong secret", header: []any{signed(t, jwt.SigningMethodHS256, []byte("other"), valid)}, status: 401},
		{name: "expired", header: []any{signed(t, jwt.SigningMethodHS256, []byte(testSecret), jwt.MapClaims{"sub": "alice", "exp": now.Add(-time.Hour).Unix()})}, status: 401},
		{name: "no expiry", header: []any{signed(t, jwt.SigningMethodHS256, []byte(testSecret), jwt.MapClaims{"sub": "alice"})}, status: 401},
		{name: "no sub", header: []any{signed(t, jwt.SigningMethodHS256, []byte(testSecret), jwt.MapClaims{"exp": now.Add(time.Hour).Unix()})}, status: 401},
		{name: "other HMAC alg", header: []any{signed(t, jwt.SigningMethodHS512, []byte(testSecret), valid)}, status: 401},
		{name: "alg none", header: []any{signed(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, valid)}, status: 401},
		{name: "agent key on a human operation", header: []any{AgentKeyHeader + ": some-key"}, status: 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := api.Get("/test/me", tt.header...)
			require.Equal(t, tt.status, resp.Code, resp.Body.String())
			if tt.status == 200 {
				var out map[string]any
				require.NoError(t, json.Unmarshal(resp.Body.Bytes(), &out))
				assert.Equal(t, tt.owner, out["ownerId"])
				return
			}
			assert.Equal(t, "application/problem+json", resp.Header().Get("Content-Type"))
			assert.Equal(t, `Bearer realm="agentbus"`, resp.Header().Get("WWW-Authenticate"))
			assert.Equal(t, "unauthorized", decodeProblem(t, resp.Body.Bytes())["kind"])
		})
	}

	t.Run("public operation", func(t *testing.T) {
		resp := api.Get("/test/public")
		require.Equal(t, 200, resp.Code)
	})
}

func TestIssuerAndAudience(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{JWTIssuer: "https://id.example", JWTAudience: "agentbus"}, Deps{})
	addAuthTestRoutes(s)
	api := testAPI(t, s)
	exp := time.Now().Add(time.Hour).Unix()
	key := []byte(testSecret)
	assert.Equal(t, 200, api.Get("/test/me", signed(t, jwt.SigningMethodHS256, key, jwt.MapClaims{"sub": "a", "exp": exp, "iss": "https://id.example", "aud": "agentbus"})).Code)
	assert.Equal(t, 401, api.Get("/test/me", signed(t, jwt.SigningMethodHS256, key, jwt.MapClaims{"sub": "a", "exp": exp, "iss": "https://evil.example", "aud": "agentbus"})).Code)
	assert.Equal(t, 401, api.Get("/test/me", signed(t, jwt.SigningMethodHS256, key, jwt.MapClaims{"sub": "a", "exp": exp, "iss": "https://id.example"})).Code)

	// NewToken's options sign what the configured API requires; the
	// tokens that lack a claim or carry another value are 401.
	tests := map[string]struct {
		opts   []TokenOption
		status int
	}{
		"issuer and audience":    {[]TokenOption{WithIssuer("https://id.example"), WithAudience("agentbus")}, 200},
		"neither":                {nil, 401},
		"no audience":            {[]TokenOption{WithIssuer("https://id.example")}, 401},
		"no issuer":              {[]TokenOption{WithAudience("agentbus")}, 401},
		"another issuer":         {[]TokenOption{WithIssuer("https://evil.example"), WithAudience("agentbus")}, 401},
		"another audience":       {[]TokenOption{WithIssuer("https://id.example"), WithAudience("billing")}, 401},
		"empty options set none": {[]TokenOption{WithIssuer(""), WithAudience("")}, 401},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			tok, err := NewToken(testSecret, "a", time.Hour, tt.opts...)
			require.NoError(t, err)
			resp := api.Get("/test/me", "Authorization: Bearer "+tok)
			require.Equal(t, tt.status, resp.Code, resp.Body.String())
			if tt.status == 401 {
				assert.Equal(t, "unauthorized", decodeProblem(t, resp.Body.Bytes())["kind"])
			}
		})
	}
}

func TestJWKSAuth(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	b64 := base64.RawURLEncoding.EncodeToString
	jwks, err := json.Marshal(map[string]any{"keys": []any{map[string]any{
		"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig",
		"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes()),
	}}})
	require.NoError(t, err)
	keys := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(jwks)
	}))
	t.Cleanup(keys.Close)

	s := newServer(t, Config{JWKSURL: keys.URL}, Deps{})
	addAuthTestRoutes(s)
	api := testAPI(t, s)
	claims := jwt.MapClaims{"sub": "carol", "exp": time.Now().Add(time.Hour).Unix()}
	rs256 := func(k *rsa.PrivateKey, kid string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
		tok.Header["kid"] = kid
		s, err := tok.SignedString(k)
		require.NoError(t, err)
		return "Authorization: Bearer " + s
	}

	resp := api.Get("/test/me", rs256(key, "k1"))
	require.Equal(t, 200, resp.Code, resp.Body.String())
	assert.Contains(t, resp.Body.String(), `"ownerId":"carol"`)
	assert.Equal(t, 401, api.Get("/test/me", rs256(other, "k1")).Code, "signed by a key not in the set")
	assert.Equal(t, 401, api.Get("/test/me", rs256(key, "unknown")).Code, "unknown kid")
	// An HS256 token must not verify against the JWKS, whatever its secret.
	assert.Equal(t, 401, api.Get("/test/me", signed(t, jwt.SigningMethodHS256, []byte(testSecret), claims)).Code)
}

func TestAgentAuth(t *testing.T) {
	t.Parallel()
	mine, theirs := uuid.New(), uuid.New()
	keys := fakeAgentKeys{sessions: map[[32]byte]Principal{
		HashAgentKey("key-mine"):   {OwnerID: "alice", SessionID: mine},
		HashAgentKey("key-theirs"): {OwnerID: "bob", SessionID: theirs},
	}}
	s := newServer(t, Config{}, Deps{AgentKeys: keys})
	addAuthTestRoutes(s)
	api := testAPI(t, s)

	tests := []struct {
		name    string
		path    string
		header  []any
		status  int
		session uuid.UUID
	}{
		{name: "own session", path: "/test/agent/sessions/" + mine.String() + "/log", header: []any{AgentKeyHeader + ": key-mine"}, status: 200, session: mine},
		{name: "no session in path", path: "/test/agent/tasks", header: []any{AgentKeyHeader + ": key-theirs"}, status: 200, session: theirs},
		{name: "another session", path: "/test/agent/sessions/" + theirs.String() + "/log", header: []any{AgentKeyHeader + ": key-mine"}, status: 403},
		{name: "not a session id", path: "/test/agent/sessions/nope/log", header: []any{AgentKeyHeader + ": key-mine"}, status: 403},
		{name: "unknown key", path: "/test/agent/tasks", header: []any{AgentKeyHeader + ": key-nobody"}, status: 401},
		{name: "no key", path: "/test/agent/tasks", status: 401},
		{name: "bearer token on an agent operation", path: "/test/agent/tasks", header: []any{bearer(t, "alice")}, status: 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := api.Get(tt.path, tt.header...)
			require.Equal(t, tt.status, resp.Code, resp.Body.String())
			if tt.status != 200 {
				assert.Equal(t, "application/problem+json", resp.Header().Get("Content-Type"))
				assert.Empty(t, resp.Header().Get("WWW-Authenticate"))
				return
			}
			var out map[string]any
			require.NoError(t, json.Unmarshal(resp.Body.Bytes(), &out))
			assert.Equal(t, tt.session.String(), out["sessionId"])
		})
	}

	t.Run("store failure is a 500", func(t *testing.T) {
		s := newServer(t, Config{}, Deps{AgentKeys: fakeAgentKeys{err: errors.New("connection refused")}})
		addAuthTestRoutes(s)
		resp := testAPI(t, s).Get("/test/agent/tasks", AgentKeyHeader+": key-mine")
		require.Equal(t, 500, resp.Code)
		assert.NotContains(t, resp.Body.String(), "connection refused")
	})
	t.Run("no key store", func(t *testing.T) {
		s := newServer(t, Config{}, Deps{})
		addAuthTestRoutes(s)
		assert.Equal(t, 401, testAPI(t, s).Get("/test/agent/tasks", AgentKeyHeader+": key-mine").Code)
	})
}

func TestRequireSession(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	ctx := context.Background()
	assert.Error(t, RequireSession(ctx, id), "no principal")
	assert.NoError(t, RequireSession(WithPrincipal(ctx, Principal{OwnerID: "alice"}), id))
	assert.NoError(t, RequireSession(WithPrincipal(ctx, Principal{OwnerID: "alice", SessionID: id}), id))
	err := RequireSession(WithPrincipal(ctx, Principal{OwnerID: "alice", SessionID: uuid.New()}), id)
	var k Kinded
	require.ErrorAs(t, err, &k)
	assert.Equal(t, KindForbidden, k.Kind())
}

func TestAgentKeyMatches(t *testing.T) {
	t.Parallel()
	h := HashAgentKey("secret-key")
	assert.True(t, AgentKeyMatches(h[:], "secret-key"))
	assert.False(t, AgentKeyMatches(h[:], "secret-kez"))
	assert.False(t, AgentKeyMatches(h[:10], "secret-key"))
}

func TestNewToken(t *testing.T) {
	t.Parallel()
	tok, err := NewToken("s3cret", "dave", time.Minute)
	require.NoError(t, err)
	v, err := newTokenVerifier(context.Background(), Config{JWTSecret: "s3cret"})
	require.NoError(t, err)
	sub, err := v.verify(tok)
	require.NoError(t, err)
	assert.Equal(t, "dave", sub)
	_, err = (&tokenVerifier{keyfunc: func(*jwt.Token) (any, error) { return []byte("other"), nil }, parser: v.parser}).verify(tok)
	assert.Error(t, err)

	for name, args := range map[string]struct {
		secret, user string
		ttl          time.Duration
	}{"no secret": {"", "u", time.Minute}, "no user": {"s", "", time.Minute}, "no ttl": {"s", "u", 0}} {
		_, err := NewToken(args.secret, args.user, args.ttl)
		assert.Error(t, err, name)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	_, err := New(Config{}, Deps{})
	assert.Error(t, err, "no secret and no JWKS")
	_, err = New(Config{JWTSecret: testSecret, Workspace: "/workspace", TraceURL: "http://localhost:16686/trace/"}, Deps{})
	assert.ErrorContains(t, err, "AGENTBUS_TRACE_URL", "a trace URL without the place of the trace id")
	_, err = New(Config{JWTSecret: testSecret, Workspace: "/workspace", TraceURL: "http://localhost:16686/trace/{traceId}"}, Deps{})
	assert.NoError(t, err)
}

// TestAVerifiedTokenIsHeldToItsTimes: a token verified once is known
// again without its signature checked, but only while its times allow it:
// past its expiry (beyond the leeway), it is refused as the parser refuses
// it; before its not-before, it is not accepted either.
func TestAVerifiedTokenIsHeldToItsTimes(t *testing.T) {
	t.Parallel()
	clock := time.Now()
	v, err := newTokenVerifierAt(context.Background(), Config{JWTSecret: testSecret}, func() time.Time { return clock })
	require.NoError(t, err)
	raw := func(claims jwt.MapClaims) string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(testSecret))
		require.NoError(t, err)
		return tok
	}
	tok := raw(jwt.MapClaims{"sub": "erin", "exp": clock.Add(2 * time.Minute).Unix()})
	for range 2 {
		sub, err := v.verify(tok)
		require.NoError(t, err)
		assert.Equal(t, "erin", sub)
	}
	clock = clock.Add(2*time.Minute + jwtLeeway + time.Second)
	_, err = v.verify(tok)
	require.Error(t, err)
	assert.ErrorIs(t, err, jwt.ErrTokenExpired)

	later := raw(jwt.MapClaims{"sub": "erin", "exp": clock.Add(time.Hour).Unix(), "nbf": clock.Add(10 * time.Minute).Unix()})
	clock = clock.Add(11 * time.Minute)
	_, err = v.verify(later)
	require.NoError(t, err, "valid once its not-before passed")
	clock = clock.Add(-11 * time.Minute)
	_, err = v.verify(later)
	assert.ErrorIs(t, err, jwt.ErrTokenNotValidYet, "the token known is still held to its not-before")

	forged := tok[:len(tok)-2] + "xx"
	_, err = v.verify(forged)
	assert.Error(t, err, "only the very bytes verified are known")
}
