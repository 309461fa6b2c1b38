package sidecar

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/agentbus/agentbus/sidecar/engine"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// Environment variables the sidecar reads.
const (
	// EnvRedisURL is the Redis server holding the session's streams.
	EnvRedisURL = "REDIS_URL"
	// EnvConfig holds the composed config as inline JSON, when no --config
	// file is given.
	EnvConfig = "AGENTBUS_SIDECAR_CONFIG"
	// EnvAPIURL is the agent API's base URL, handed to the agent.
	EnvAPIURL = "AGENTBUS_API_URL"
	// EnvSessionKey is the session's agent API key, handed to the agent.
	EnvSessionKey = "AGENTBUS_SESSION_KEY"
)

// DefaultRedisURL is used when REDIS_URL is unset.
const DefaultRedisURL = "redis://127.0.0.1:6379/0"

// Main runs `agentbus sidecar --session <id> [--config <file>]` until the
// session ends. The composed config comes from the --config file, else the
// AGENTBUS_SIDECAR_CONFIG variable (inline JSON), else the Redis key
// agent:session:{<id>}:config, else defaults (the script engine's default
// scenario). Logs go to slog.Default() with component=sidecar and
// session_id. It returns an error when the session ended with status error.
func Main(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sidecar", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	session := fs.String("session", "", "the session `id` (required)")
	configFile := fs.String("config", "", "the composed config, a JSON `file`")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("sidecar: %w (usage: agentbus sidecar --session <id> [--config <file>])", err)
	}
	if !protocol.ValidSessionID(*session) {
		return fmt.Errorf("sidecar: --session %q is not a session id (a-z, 0-9, '-', '_')", *session)
	}
	log := slog.Default().With("component", "sidecar", "session_id", *session)

	url := os.Getenv(EnvRedisURL)
	if url == "" {
		url = DefaultRedisURL
	}
	ropts, err := redis.ParseURL(url)
	if err != nil {
		return fmt.Errorf("sidecar: %s: %w", EnvRedisURL, err)
	}
	rdb := redis.NewClient(ropts)
	defer rdb.Close()

	opts := Options{
		SessionID: *session,
		Redis:     rdb,
		API:       engine.AgentAPI{URL: os.Getenv(EnvAPIURL), Key: os.Getenv(EnvSessionKey)},
		Logger:    log,
	}
	cfg, err := loadConfig(ctx, rdb, *session, *configFile, os.Getenv(EnvConfig))
	if err != nil {
		// The config cannot be read: still end the session, so it does not
		// wait for a sidecar that will never speak.
		log.Error("config", "error", err)
		if _, werr := newRunner(withDefaults(opts)).endEarly(protocol.ReasonConfigError, err); werr != nil {
			return errors.Join(err, werr)
		}
		return err
	}
	opts.Config = cfg
	end, err := Run(ctx, opts)
	if errors.Is(err, ErrSuspended) {
		return nil
	}
	if err != nil {
		return err
	}
	if end.Status == protocol.StatusError {
		return fmt.Errorf("sidecar: session ended with %s: %s", end.Reason, end.Error)
	}
	return nil
}

func withDefaults(o Options) Options {
	o.setDefaults()
	return o
}

// loadConfig reads the composed config from the first source that has one.
func loadConfig(ctx context.Context, rdb *redis.Client, session, file, inline string) (protocol.Config, error) {
	var raw []byte
	switch {
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return protocol.Config{}, fmt.Errorf("config file: %w", err)
		}
		raw = b
	case inline != "":
		raw = []byte(inline)
	default:
		b, err := rdb.Get(ctx, protocol.ConfigKey(session)).Bytes()
		switch {
		case errors.Is(err, redis.Nil):
			raw = []byte("{}")
		case err != nil:
			return protocol.Config{}, fmt.Errorf("config from redis: %w", err)
		default:
			raw = b
		}
	}
	cfg, err := protocol.ParseConfig(raw)
	if err != nil {
		return protocol.Config{}, err
	}
	if cfg.SessionID != "" && cfg.SessionID != session {
		return protocol.Config{}, fmt.Errorf("config is for session %q, not %q", cfg.SessionID, session)
	}
	return cfg, nil
}
