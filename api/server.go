// Package api is agentbus's HTTP service: the human API (/api/agents/...,
// a person's bearer JWT), the agent API (/api/agent/..., a session's API
// key) and the live streams (Server-Sent Events), described by an OpenAPI
// 3.1 document that Huma generates from the operations' types.
//
// Conventions every operation follows (DESIGN.md section 5): JSON names are
// lowerCamelCase; every operation has a summary and tags, every field a doc
// and an example; errors are RFC 9457 problem+json, mapped from error kinds
// in one place (MapError); every command (POST, PUT, PATCH, DELETE) takes an
// Idempotency-Key header.
//
// Adding endpoints: one file per resource (sessions.go, queue.go, ...) with
// a method `func (s *Server) addSessionRoutes(api huma.API)` that registers
// its operations with register (or registerSSE), called from addRoutes.
// Each operation sets OperationID, Summary, Tags and Security (HumanAuth or
// AgentAuth); handlers read the caller with OwnerID / PrincipalFrom, return
// domain errors as they are (MapError maps them), and use CommandID as the
// id of the command they send. TestOpenAPIConventions checks every one.
package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentbus/agentbus/api/docsui"
	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/internal/health"
	"github.com/agentbus/agentbus/postgres/queries"
)

// Deps are the services the API reads from and writes to. A nil dependency
// turns off what needs it, as documented on each field.
type Deps struct {
	// Runners tells which runner runs a session's sidecar, or that the
	// session waits for one with room; nil leaves both out of the detail.
	Runners RunnerPlaces
	// AgentKeys authenticates agents; nil refuses every agent key (401).
	AgentKeys AgentKeys
	// SessionOwners tells whose a session is, for the session stream; nil
	// answers 404 for every session.
	SessionOwners SessionOwners
	// Idempotency remembers the first response of each Idempotency-Key;
	// nil ignores the header.
	Idempotency IdempotencyStore
	// JetStream feeds the live streams from AGENTS_EVENTS; nil answers 503
	// on them.
	JetStream jetstream.JetStream
	// Checks are the readiness checks served on /readyz; nil serves none.
	Checks *health.Checks
	// Results finds the recorded result of a command that was applied
	// (commands.Results). With it, a repeat of a request whose first
	// attempt died after its command was applied is answered at once;
	// nil makes such a repeat wait until the key is taken over.
	Results command.ResultStore
	// Commands sends the commands of the command endpoints and waits for
	// their results (a *command.Client); nil answers 503 on them.
	Commands CommandSender
	// Queries answers the read endpoints; nil answers 503 on them.
	Queries *queries.Store
	// WebhookDB stores the owners' webhooks and their deliveries (the
	// postgres package's writes); nil answers 503 on the webhook commands.
	WebhookDB *pgxpool.Pool
	// Metrics receives the API's request durations and live stream count;
	// nil measures nothing.
	Metrics prometheus.Registerer
}

// Server is the HTTP API. It is an http.Handler.
type Server struct {
	cfg    Config
	deps   Deps
	api    huma.API
	mux    *http.ServeMux
	tokens *tokenVerifier
	cancel context.CancelFunc

	// QueueLimiter limits, per session, how fast messages are enqueued.
	QueueLimiter *SessionLimiter
	// owners remembers the owners of sessions the queue looked up.
	owners ownerCache

	metrics *metrics
	// fanout feeds the live streams.
	fanout *fanout
}

// New builds the API: the operations on a net/http ServeMux, the OpenAPI
// document on /openapi.json (and .yaml), its docs on /docs, and /healthz
// and /readyz. Close releases what it started (the JWKS refresh).
func New(cfg Config, deps Deps) (*Server, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	tokens, err := newTokenVerifier(ctx, cfg)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &Server{
		cfg:          cfg,
		deps:         deps,
		mux:          http.NewServeMux(),
		tokens:       tokens,
		cancel:       cancel,
		QueueLimiter: NewSessionLimiter(cfg.QueueRate, cfg.QueueBurst),
	}
	s.api = humago.New(s.mux, s.humaConfig())
	s.api.UseMiddleware(traced)
	if s.metrics = newMetrics(deps.Metrics); s.metrics != nil {
		s.api.UseMiddleware(s.metrics.observe)
	}
	s.api.UseMiddleware(s.authenticate, s.checkText, s.idempotency)
	s.addRoutes(s.api)

	checks := deps.Checks
	if checks == nil {
		checks = &health.Checks{}
	}
	checks.Register(s.mux)
	docsui.Register(s.mux, "/docs", "/openapi.json", s.cfg.Title+" Reference")
	return s, nil
}

// humaConfig is Huma's default configuration, OpenAPI 3.1, without the
// $schema links in bodies (the document is the contract), with both
// security schemes and the document's conventions applied to every
// operation.
func (s *Server) humaConfig() huma.Config {
	config := huma.DefaultConfig(s.cfg.Title, s.cfg.Version)
	config.CreateHooks = nil
	// /docs is docsui's page, whose renderer is embedded rather than
	// loaded from a CDN.
	config.DocsPath = ""
	config.Info.Description = "The control plane for AI agent sessions: start, steer, pause and review agent sessions, " +
		"and follow them live. People authenticate with a bearer JWT; agents with their session's API key."
	config.Components.SecuritySchemes = securitySchemes()
	config.OnAddOperation = append(config.OnAddOperation, documentOperation)
	return config
}

// addRoutes registers every operation of the API, one group per resource.
func (s *Server) addRoutes(api huma.API) {
	s.addStreamRoutes(api)
	s.addSessionRoutes(api)
	s.addSessionControlRoutes(api)
	s.addForceCancelRoute(api)
	s.addSessionSkillRoutes(api)
	s.addSessionConfigRoutes(api)
	s.addPermissionRoutes(api)
	s.addQueueRoutes(api)
	s.addPoolRoutes(api)
	s.addAgentRoutes(api)
	s.addTranscriptRoutes(api)
	s.addCheckpointRoutes(api)
	s.addCheckpointDiffRoute(api)
	s.addChainRoutes(api)
	s.addTemplateRoutes(api)
	s.addSkillRoutes(api)
	s.addWebhookRoutes(api)
	s.addWebhookDeliveryRoutes(api)
}

// ServeHTTP serves the API. A request that matches no route (404, 405)
// gets a problem+json body too.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := s.mux.Handler(r); pattern == "" {
		w = &routeProblemWriter{ResponseWriter: w}
	}
	s.mux.ServeHTTP(w, r)
}

// routeProblemWriter replaces the ServeMux's plain-text error with a
// problem+json body of the same status.
type routeProblemWriter struct {
	http.ResponseWriter
	replaced bool
}

func (w *routeProblemWriter) WriteHeader(code int) {
	if code < 400 {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.replaced = true
	detail := "no such resource"
	if code == http.StatusMethodNotAllowed {
		detail = "the resource does not support this method"
	}
	p := newProblemOf(code, kindOfStatus(code), detail)
	w.Header().Del("X-Content-Type-Options")
	w.Header().Set("Content-Type", "application/problem+json")
	w.ResponseWriter.WriteHeader(code)
	_ = json.NewEncoder(w.ResponseWriter).Encode(p)
}

func (w *routeProblemWriter) Write(b []byte) (int, error) {
	if w.replaced {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// API returns the Huma API, for tests (humatest.Wrap) and for registering
// operations.
func (s *Server) API() huma.API { return s.api }

// OpenAPI returns the OpenAPI document as JSON.
func (s *Server) OpenAPI() ([]byte, error) {
	b, err := s.api.OpenAPI().MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("api: marshal openapi: %w", err)
	}
	return b, nil
}

// Close stops the background work the server started.
func (s *Server) Close() {
	s.cancel()
}

// OpenAPIDocument returns the OpenAPI document of an API built with cfg
// and no dependencies, for `agentbus openapi`. A JWT secret is not needed.
func OpenAPIDocument(cfg Config) ([]byte, error) {
	cfg.JWKSURL = "" // describing the API fetches no keys
	if cfg.JWTSecret == "" {
		cfg.JWTSecret = DevJWTSecret
	}
	if cfg.Workspace == "" {
		cfg.Workspace = "/workspace" // describing the API touches no directory
	}
	s, err := New(cfg, Deps{})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.OpenAPI()
}
