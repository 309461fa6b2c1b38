// Package localserver starts private Postgres and Redis servers from the
// machine's own binaries. `agentbus up` uses it when no DATABASE_URL or
// REDIS_URL is given, and the integration tests use it for real servers
// on loopback.
package localserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/agentbus/agentbus/postgres"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"
)

// PostgresConfig says where and how to run a private Postgres server.
type PostgresConfig struct {
	// Dir holds the cluster's data directory; initdb runs when it is empty.
	Dir string
	// Port is the loopback TCP port to listen on.
	Port int
	// Durable keeps fsync on; tests turn it off because they throw the data away.
	Durable bool
	// Log receives the server's output; nil discards it.
	Log *os.File
	// Settings are more server settings, each name=value.
	Settings []string
}

// Postgres is a running private Postgres server.
type Postgres struct {
	cfg  PostgresConfig
	cmd  *exec.Cmd
	done chan struct{}
}

// StartPostgres initialises the cluster if needed, starts the server and
// waits until it accepts connections. When run as root, the server runs as
// the unprivileged "postgres" (or "nobody") user, because Postgres refuses
// to run as root.
func StartPostgres(ctx context.Context, cfg PostgresConfig) (*Postgres, error) {
	bin, err := postgresBinDir()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	cred, err := unprivileged()
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(cfg.Dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(filepath.Join(cfg.Dir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		// initdb's own sync fsyncs each of its thousand files, seconds
		// on a busy disk; one syncfs of the file system afterwards makes
		// the new cluster as durable in a fraction of that.
		args := []string{"-D", cfg.Dir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"}
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("initdb %s: %w: %s (the data directory and its parents must be reachable by the server's user)", cfg.Dir, err, out)
		}
		if cfg.Durable {
			if err := syncFS(cfg.Dir); err != nil {
				return nil, fmt.Errorf("initdb %s: sync: %w", cfg.Dir, err)
			}
		}
	}
	args := []string{"-D", cfg.Dir, "-p", strconv.Itoa(cfg.Port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=",
		"-c", "max_connections=200",
	}
	if !cfg.Durable {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	for _, s := range cfg.Settings {
		args = append(args, "-c", s)
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	// Pdeathsig makes sure the server does not outlive us if we are killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	if cfg.Log != nil {
		cmd.Stdout, cmd.Stderr = cfg.Log, cfg.Log
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	p := &Postgres{cfg: cfg, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	if err := p.waitReady(ctx); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// URL returns the connection URL of the given database on this server.
func (p *Postgres) URL(database string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.cfg.Port, database)
}

// CreateDatabase creates a database if it does not exist yet.
func (p *Postgres) CreateDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, p.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return postgres.CreateDatabase(ctx, conn, name)
}

func (p *Postgres) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-p.done:
			return fmt.Errorf("postgres exited during start-up (see its log)")
		default:
		}
		c, cancel := context.WithTimeout(ctx, time.Second)
		conn, err := pgx.Connect(c, p.URL("postgres"))
		cancel()
		if err == nil {
			_ = conn.Close(ctx)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres on port %d not ready: %w", p.cfg.Port, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop asks the server for a fast shutdown and waits for it to exit.
func (p *Postgres) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		slog.Warn("postgres did not stop in time; killing it", "component", "localserver")
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func postgresBinDir() (string, error) {
	if path, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(path); err == nil {
			return filepath.Dir(real), nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(matches) == 0 {
		return "", errors.New("no postgres binaries found: install Debian's postgresql package (make deps) or set DATABASE_URL")
	}
	return filepath.Dir(matches[len(matches)-1]), nil
}

// unprivileged returns the credential to run Postgres with, or nil when
// we are not root.
func unprivileged() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("running as root and no unprivileged user (postgres or nobody) to run Postgres as")
}

// Kill stops the server and its backends abruptly, as a crash would (they
// share the server's process group); crash tests use it.
func (p *Postgres) Kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Restart starts a new server on the same directory and port, as an
// operator restarting Postgres would; it recovers from its write-ahead log.
func (p *Postgres) Restart(ctx context.Context) (*Postgres, error) {
	return StartPostgres(ctx, p.cfg)
}

// syncFS flushes the file system holding dir to disk.
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}
