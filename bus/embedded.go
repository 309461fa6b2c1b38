package bus

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedConfig configures a NATS server with JetStream started inside the
// current process: the single-node setup of `agentbus up` and of the tests.
type EmbeddedConfig struct {
	// StoreDir is the directory JetStream keeps its files in. Required.
	StoreDir string
	// Host is the client listen address; default 127.0.0.1.
	Host string
	// Port is the client port; default 4222, -1 picks a free port.
	Port int
	// HTTPPort is the monitoring port (/healthz, /varz, /jsz); 0 turns it off.
	HTTPPort int
	// ServerName names the server in logs and monitoring; default "agentbus".
	ServerName string
	// MaxStore caps JetStream file storage in bytes; 0 keeps the server's
	// default (75% of the free disk space).
	MaxStore int64
	// ReadyTimeout bounds the wait for the server to accept connections;
	// default 30s.
	ReadyTimeout time.Duration
	// Logger receives the server's log; nil keeps the server quiet.
	Logger *slog.Logger
	// Users is a server configuration holding the users' authorization
	// block (nats/users.conf with its passwords defined, see UsersConfig);
	// empty lets anyone who reaches the port in, which only a test that
	// runs nothing else beside it may want.
	Users string
	// SkipFsync stores messages without an fsync before each ack. A
	// crashed process still loses nothing (every write reaches the file
	// before the ack), but a crashed machine can lose what was stored
	// since the server's last periodic sync (every 2 minutes). Benchmarks
	// use it to measure what the fsync costs.
	SkipFsync bool
}

func (c *EmbeddedConfig) setDefaults() {
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	if c.Port == 0 {
		c.Port = 4222
	}
	if c.ServerName == "" {
		c.ServerName = "agentbus"
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = 30 * time.Second
	}
}

// Validate reports a configuration the server cannot start with.
func (c EmbeddedConfig) Validate() error {
	if c.StoreDir == "" {
		return errors.New("bus: EmbeddedConfig.StoreDir is required")
	}
	if c.Port < -1 || c.Port > 65535 {
		return fmt.Errorf("bus: EmbeddedConfig.Port %d is out of range", c.Port)
	}
	return nil
}

// StartEmbedded starts a NATS server with JetStream in this process and waits
// until it accepts connections. JetStream fsyncs every write before it
// acknowledges a publish (sync_interval: always), as nats/server.conf does:
// with a single copy of the data, an acknowledged message must survive a
// machine crash. The caller stops the server with Shutdown.
func StartEmbedded(cfg EmbeddedConfig) (*server.Server, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Port > 0 {
		// The server would wait out ReadyTimeout on a port that is taken;
		// fail at once instead.
		l, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
		if err != nil {
			return nil, fmt.Errorf("bus: embedded nats server: %w", err)
		}
		_ = l.Close()
	}
	opts := &server.Options{}
	if cfg.Users != "" {
		// The server's own parser reads the users and their permissions,
		// exactly as nats-server reads users.conf in a deployment.
		if err := opts.ProcessConfigString(cfg.Users); err != nil {
			return nil, fmt.Errorf("bus: embedded nats server: users: %w", err)
		}
	}
	opts.ServerName = cfg.ServerName
	opts.Host, opts.Port = cfg.Host, cfg.Port
	opts.HTTPHost, opts.HTTPPort = cfg.Host, cfg.HTTPPort
	opts.JetStream, opts.StoreDir, opts.JetStreamMaxStore = true, cfg.StoreDir, cfg.MaxStore
	opts.SyncAlways = !cfg.SkipFsync
	// The host process owns the signals; the server must not exit on them.
	opts.NoSigs = true
	opts.NoLog = cfg.Logger == nil
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("bus: embedded nats server: %w", err)
	}
	if cfg.Logger != nil {
		srv.SetLoggerV2(slogAdapter{cfg.Logger.With("component", "nats-server")}, false, false, false)
	}
	srv.Start()
	if !srv.ReadyForConnections(cfg.ReadyTimeout) {
		srv.Shutdown()
		return nil, fmt.Errorf("bus: embedded nats server not ready after %s", cfg.ReadyTimeout)
	}
	if !srv.JetStreamEnabled() {
		srv.Shutdown()
		return nil, errors.New("bus: embedded nats server started without JetStream")
	}
	return srv, nil
}

// passwordVariable is how users.conf names each user's password.
var passwordVariable = regexp.MustCompile(`\$(NATS_PASSWORD_[A-Z0-9_]+)`)

// UsersConfig returns conf (nats/users.conf) with each $NATS_PASSWORD_<USER>
// it uses defined, as password returns it for the variable's suffix in
// lower case (OPERATOR -> "operator", SIDECAR_DISPATCH ->
// "sidecar_dispatch"), for EmbeddedConfig.Users.
func UsersConfig(conf string, password func(user string) (string, error)) (string, error) {
	var b strings.Builder
	seen := map[string]bool{}
	for _, m := range passwordVariable.FindAllStringSubmatch(conf, -1) {
		name := m[1]
		if seen[name] {
			continue
		}
		seen[name] = true
		pw, err := password(strings.ToLower(strings.TrimPrefix(name, "NATS_PASSWORD_")))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s: %s\n", name, strconv.Quote(pw))
	}
	return b.String() + conf, nil
}

// slogAdapter writes the server's log lines to slog.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Noticef(format string, v ...any) { a.l.Info(fmt.Sprintf(format, v...)) }
func (a slogAdapter) Warnf(format string, v ...any)   { a.l.Warn(fmt.Sprintf(format, v...)) }
func (a slogAdapter) Fatalf(format string, v ...any)  { a.l.Error(fmt.Sprintf(format, v...)) }
func (a slogAdapter) Errorf(format string, v ...any)  { a.l.Error(fmt.Sprintf(format, v...)) }
func (a slogAdapter) Debugf(format string, v ...any)  { a.l.Debug(fmt.Sprintf(format, v...)) }
func (a slogAdapter) Tracef(format string, v ...any)  { a.l.Debug(fmt.Sprintf(format, v...)) }
