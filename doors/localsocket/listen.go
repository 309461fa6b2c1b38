// Package localsocket is seed 002's local door: NDJSON over a Unix domain
// socket, one JSON object per line, many sessions per connection, each
// named by an id the client chooses. Only the user who owns the socket,
// and the uids the operator mapped to users, may connect (mode 0600, and
// the peer's uid checked with SO_PEERCRED); a connection acts for the user
// of the bearer token its first line presents, or for the user its uid is
// mapped to, and for nobody else: agents may run as the socket's owner,
// so being local proves nothing. Every command is the HTTP API's own
// (doors). See docs/local-socket.md.
package localsocket

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/agentbus/agentbus/doors"
)

// Config is the door's configuration.
type Config struct {
	doors.Config
	// Path is the socket's file.
	Path string
	// WriteTimeout bounds each write to a client; one that reads slower
	// is disconnected. Default 10s.
	WriteTimeout time.Duration
	// AuthTimeout is how long a connection may take to authenticate
	// before it is closed. Default 10s.
	AuthTimeout time.Duration
}

// Caller is the user a connection acts for: the API called as that user,
// and the feed the connection's sessions are read from.
type Caller struct {
	// UserID is the user, told to the client when known.
	UserID string
	API    doors.API
	Feed   doors.Feed
}

// Credentials map a connection to a user, and nothing else does: a
// connection that presents no valid token and whose peer's uid is not
// mapped acts for nobody.
type Credentials struct {
	// Token verifies a bearer token as the HTTP API does and returns its
	// user; a token the API refuses is a *doors.Error of kind
	// unauthorized.
	Token func(ctx context.Context, token string) (Caller, error)
	// ByUID are the users the operator mapped peers' uids to: a
	// connection from such a uid acts for its user without a token.
	ByUID map[uint32]func() (Caller, error)
}

// Server serves the socket.
type Server struct {
	cfg   Config
	creds Credentials
	uid   uint32
	ln    *net.UnixListener
}

// Listen creates the socket at cfg.Path, mode 0600, owned by this
// process's user; a stale socket file (nobody listening) is removed
// first. Each connection acts for the user creds give it.
func Listen(cfg Config, creds Credentials) (*Server, error) {
	if creds.Token == nil {
		return nil, errors.New("localsocket: Credentials.Token is required")
	}
	cfg.Config = cfg.Config.WithDefaults()
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.AuthTimeout <= 0 {
		cfg.AuthTimeout = 10 * time.Second
	}
	if err := os.MkdirAll(filepath.Dir(cfg.Path), 0o700); err != nil {
		return nil, err
	}
	if err := removeStale(cfg.Path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: cfg.Path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("localsocket: listen on %s: %w", cfg.Path, err)
	}
	if err := os.Chmod(cfg.Path, 0o600); err != nil {
		_ = ln.Close()
		return nil, err
	}
	ln.SetUnlinkOnClose(true)
	return &Server{cfg: cfg, creds: creds, uid: uint32(os.Getuid()), ln: ln}, nil
}

// removeStale removes a socket file nobody listens on, which a process
// that died leaves behind; a live socket or any other file is an error.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("localsocket: %s exists and is not a socket", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		_ = c.Close()
		return fmt.Errorf("localsocket: %s is in use by a running server", path)
	}
	return os.Remove(path)
}

// Path is the socket's file.
func (s *Server) Path() string { return s.cfg.Path }

// Serve accepts connections until ctx ends, then closes the socket and
// every connection, and removes the file.
func (s *Server) Serve(ctx context.Context) error {
	var wg sync.WaitGroup
	stop := context.AfterFunc(ctx, func() { _ = s.ln.Close() })
	defer stop()
	defer wg.Wait()
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("localsocket: accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serveConn(ctx, c)
		}()
	}
}

// peerUID is the uid of the process at the other end.
func peerUID(c *net.UnixConn) (uint32, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, credErr
	}
	return cred.Uid, nil
}

func (s *Server) serveConn(ctx context.Context, c *net.UnixConn) {
	defer c.Close()
	out := &writer{c: c, timeout: s.cfg.WriteTimeout}
	uid, err := peerUID(c)
	byUID, mapped := s.creds.ByUID[uid]
	if err != nil || (uid != s.uid && !mapped) {
		slog.Warn("local socket: connection refused", "component", "localsocket", "peer_uid", uid, "err", err)
		out.write(map[string]any{"type": "error", "kind": "forbidden", "status": 403,
			"message": fmt.Sprintf("only the socket's owner (uid %d) and the uids mapped to a user may connect", s.uid)})
		return
	}
	serverCtx := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The read waits for the client alone: the connection is closed when
	// the server stops or a write fails.
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	r := bufio.NewReaderSize(c, 4096)
	var caller Caller
	if mapped {
		if caller, err = byUID(); err != nil {
			out.write(map[string]any{"type": "error", "kind": doors.KindInternal, "message": "internal error"})
			slog.Error("local socket: credentials", "component", "localsocket", "peer_uid", uid, "err", err)
			return
		}
	} else if caller, err = s.authenticate(ctx, c, r, out); err != nil {
		slog.Info("local socket: not authenticated", "component", "localsocket", "peer_uid", uid, "err", err)
		return
	}
	conn := newConn(s.cfg, out, cancel)
	conn.doors = doors.NewConn(ctx, s.cfg.Config, caller.API, caller.Feed, conn)
	conn.serve(ctx, r)
	if serverCtx.Err() == nil {
		// A client that went away cannot answer its pending permission
		// requests: they are denied, as seed 002's agent-cli does. (When
		// the server stops, its sessions' agents stop with it.)
		deny, cancelDeny := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		conn.doors.DenyPending(deny, "Session closed")
		cancelDeny()
	}
	conn.doors.Close()
}
