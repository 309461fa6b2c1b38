package bus

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
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
	opts := &server.Options{
		ServerName:        cfg.ServerName,
		Host:              cfg.Host,
		Port:              cfg.Port,
		HTTPHost:          cfg.Host,
		HTTPPort:          cfg.HTTPPort,
		JetStream:         true,
		StoreDir:          cfg.StoreDir,
		JetStreamMaxStore: cfg.MaxStore,
		SyncAlways:        !cfg.SkipFsync,
		// The host process owns the signals; the server must not exit on them.
		NoSigs: true,
		NoLog:  cfg.Logger == nil,
	}
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

// slogAdapter writes the server's log lines to slog.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Noticef(format string, v ...any) { a.l.Info(fmt.Sprintf(format, v...)) }
func (a slogAdapter) Warnf(format string, v ...any)   { a.l.Warn(fmt.Sprintf(format, v...)) }
func (a slogAdapter) Fatalf(format string, v ...any)  { a.l.Error(fmt.Sprintf(format, v...)) }
func (a slogAdapter) Errorf(format string, v ...any)  { a.l.Error(fmt.Sprintf(format, v...)) }
func (a slogAdapter) Debugf(format string, v ...any)  { a.l.Debug(fmt.Sprintf(format, v...)) }
func (a slogAdapter) Tracef(format string, v ...any)  { a.l.Debug(fmt.Sprintf(format, v...)) }
