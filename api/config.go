package api

import (
	"errors"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentbus/agentbus/bus/feed"
	"github.com/agentbus/agentbus/sidecar/workspace"
)

// DevJWTSecret is the HS256 secret of `agentbus api --dev` and `agentbus
// token --dev`, and of the OpenAPI document's build. It is public: anyone
// can sign a token with it, so it is used only when explicitly asked for
// (`up` generates a secret of its own).
const DevJWTSecret = "agentbus-dev-secret-do-not-use-in-production"

// TraceIDPlaceholder is what Config.TraceURL holds where the trace id goes.
const TraceIDPlaceholder = "{traceId}"

// TraceURLEnv names the variable that sets Config.TraceURL.
const TraceURLEnv = "AGENTBUS_TRACE_URL"

// Config configures the HTTP API.
type Config struct {
	// Title is the API's title in the OpenAPI document; default "agentbus".
	Title string
	// Version is the API's version in the OpenAPI document; default "1.0.0".
	Version string

	// JWTSecret verifies people's HS256 bearer tokens. One of JWTSecret and
	// JWKSURL is required.
	JWTSecret string
	// JWKSURL, when set, verifies people's bearer tokens with the keys it
	// serves (RS256, ES256, EdDSA, ...) instead of JWTSecret.
	JWKSURL string
	// JWTIssuer, when set, is the iss every token must carry.
	JWTIssuer string
	// JWTAudience, when set, is an aud every token must carry.
	JWTAudience string

	// HeartbeatInterval is how often a live stream sends a ping event when
	// nothing else happens, so proxies keep it open; default 15s.
	HeartbeatInterval time.Duration
	// StreamBuffer is how many events a live stream holds for a client that
	// reads slower than the bus delivers; default 256.
	StreamBuffer int
	// SlowClientTimeout is how long a live stream whose buffer overflowed
	// may take to send what the buffer holds: a client that took longer is
	// told to reconnect from its last event and the stream ends; a faster
	// one catches up from the event log and goes on. Default 2s.
	SlowClientTimeout time.Duration
	// SessionStreamAggregates are the aggregates whose events, keyed by the
	// session id (agents.evt.<aggregate>.<sessionId>.>), make up a session's
	// live stream; default ["session", "queue", "activity"]: its status,
	// its queue and what its agent does.
	SessionStreamAggregates []string

	// QueueRate is how many messages per second one session may enqueue
	// (sustained); default 5.
	QueueRate float64
	// QueueBurst is how many messages one session may enqueue at once;
	// default 20.
	QueueBurst int

	// MCPAllowPrivate lets MCP servers be on loopback and private
	// addresses (AGENTBUS_MCP_ALLOW_PRIVATE=1: tests, a local setup);
	// cloud metadata and link-local addresses are refused regardless.
	MCPAllowPrivate bool

	// WebhookAllowPrivate lets webhooks post to loopback and private
	// addresses, over http too (AGENTBUS_WEBHOOK_ALLOW_PRIVATE=1: tests, a
	// local setup); cloud metadata and link-local addresses are refused
	// regardless, and https is required otherwise.
	WebhookAllowPrivate bool

	// Workspace is the root of the sessions' working directories: each
	// owner's sessions work under <Workspace>/<owner id>/. Required.
	Workspace workspace.Root

	// CheckpointDir holds the sessions' checkpoint stores,
	// <CheckpointDir>/<session id>.git, as the runtime on this host keeps
	// them: the checkpoint diff reads them there. Empty, or a store not
	// there, answers 503 on the diff.
	CheckpointDir string

	// CommandTimeout is how long a command endpoint waits for the
	// command's result before answering 504 (the command still runs);
	// default 10s.
	CommandTimeout time.Duration

	// TraceURL, when set, links each session to its trace in a tracing UI
	// (Jaeger, Tempo, ...): the URL with TraceIDPlaceholder replaced by the
	// trace id, e.g. http://localhost:16686/trace/{traceId}
	// (AGENTBUS_TRACE_URL).
	TraceURL string

	// Now is the clock the next due time of a schedule is told from;
	// default time.Now.
	Now func() time.Time
}

func (c *Config) setDefaults() {
	if c.Title == "" {
		c.Title = "agentbus"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Version == "" {
		c.Version = "1.0.0"
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 15 * time.Second
	}
	if c.StreamBuffer <= 0 {
		c.StreamBuffer = 256
	}
	if c.SlowClientTimeout <= 0 {
		c.SlowClientTimeout = 2 * time.Second
	}
	if len(c.SessionStreamAggregates) == 0 {
		c.SessionStreamAggregates = []string{"session", "queue", feed.Aggregate}
	}
	if c.QueueRate <= 0 {
		c.QueueRate = 5
	}
	if c.QueueBurst <= 0 {
		c.QueueBurst = 20
	}
	if c.CommandTimeout <= 0 {
		c.CommandTimeout = 10 * time.Second
	}
}

// Validate reports a configuration the API cannot run with.
func (c Config) Validate() error {
	if c.JWTSecret == "" && c.JWKSURL == "" {
		return errors.New("api: Config.JWTSecret or Config.JWKSURL is required")
	}
	if c.Workspace == "" || !filepath.IsAbs(string(c.Workspace)) {
		return errors.New("api: Config.Workspace, an absolute path, is required")
	}
	if c.TraceURL != "" && !strings.Contains(c.TraceURL, TraceIDPlaceholder) {
		return errors.New("api: Config.TraceURL (" + TraceURLEnv + ") must hold " + TraceIDPlaceholder + " where the trace id goes")
	}
	return nil
}
