// Package localserver starts private Postgres and Redis servers from the
// machine's own binaries. `agentbus up` uses it when no DATABASE_URL or
// REDIS_URL is given, and the integration tests use it for real servers
// on loopback.
package localserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
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
	// Password is the postgres user's password; connections over TCP must
	// give it (scram-sha-256), since whatever runs on this machine can
	// reach the port. Empty: a random one, kept for Restart.
	Password string
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
	cred, err := unprivileged()
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if cfg.Dir, err = reachableDir(cfg.Dir, cred); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(cfg.Dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	if cfg.Password == "" {
		if cfg.Password, err = randomPassword(); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(filepath.Join(cfg.Dir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := initCluster(ctx, bin, cfg, cred); err != nil {
			return nil, err
		}
	} else if err := lockCluster(ctx, bin, cfg, cred); err != nil {
		return nil, err
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

// initCluster creates a cluster whose postgres user has cfg.Password and
// whose every connection must give it.
func initCluster(ctx context.Context, bin string, cfg PostgresConfig, cred *syscall.Credential) error {
	pwfile, err := passwordFile(cfg.Dir, cfg.Password, cred)
	if err != nil {
		return err
	}
	defer os.Remove(pwfile)
	// initdb's own sync fsyncs each of its thousand files, seconds on a
	// busy disk; one syncfs of the file system afterwards makes the new
	// cluster as durable in a fraction of that.
	args := []string{"-D", cfg.Dir, "-U", "postgres", "--auth=scram-sha-256", "--pwfile", pwfile,
		"-E", "UTF8", "--locale=C", "--no-sync"}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb %s: %w: %s (the data directory and its parents must be reachable by the server's user)", cfg.Dir, err, out)
	}
	if err := writeLock(cfg.Dir, cfg.Password, cred); err != nil {
		return err
	}
	if cfg.Durable {
		if err := syncFS(cfg.Dir); err != nil {
			return fmt.Errorf("initdb %s: sync: %w", cfg.Dir, err)
		}
	}
	return nil
}

// lockFile records, in a cluster's directory, the SHA-256 of the password
// its postgres user was last given, so a start with the same password
// changes nothing.
const lockFile = "agentbus-password.sha256"

// lockCluster makes an existing cluster require cfg.Password: one created
// by an earlier version trusted every local connection, and one may have
// had another password. It sets the password in single-user mode (the
// server is not running yet) and rewrites pg_hba.conf to scram-sha-256.
func lockCluster(ctx context.Context, bin string, cfg PostgresConfig, cred *syscall.Credential) error {
	sum := sha256.Sum256([]byte(cfg.Password))
	if raw, err := os.ReadFile(filepath.Join(cfg.Dir, lockFile)); err == nil && strings.TrimSpace(string(raw)) == hex.EncodeToString(sum[:]) {
		return nil
	}
	// The password is hex from Password's callers or our own generator;
	// anything else could break out of the literal.
	if strings.ContainsAny(cfg.Password, "'\\\n") {
		return errors.New("postgres: the password may not hold quotes, backslashes or newlines")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "postgres"), "--single", "-D", cfg.Dir, "postgres")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Stdin = strings.NewReader("ALTER USER postgres PASSWORD '" + cfg.Password + "';\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("postgres %s: set the password: %w: %s", cfg.Dir, err, out)
	}
	return writeLock(cfg.Dir, cfg.Password, cred)
}

// hba requires a password of every TCP connection; the server listens on
// no Unix socket.
const hba = `# Written by agentbus: every connection gives its password.
host all all 127.0.0.1/32 scram-sha-256
host all all ::1/128 scram-sha-256
`

// writeLock writes pg_hba.conf and the password's record.
func writeLock(dir, password string, cred *syscall.Credential) error {
	sum := sha256.Sum256([]byte(password))
	for name, content := range map[string]string{"pg_hba.conf": hba, lockFile: hex.EncodeToString(sum[:]) + "\n"} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		if cred != nil {
			if err := os.Chown(path, int(cred.Uid), int(cred.Gid)); err != nil {
				return fmt.Errorf("postgres: %w", err)
			}
		}
	}
	return nil
}

// passwordFile writes password to a file initdb's user can read, beside
// the cluster's directory.
func passwordFile(dir, password string, cred *syscall.Credential) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(dir), ".pwfile-*")
	if err != nil {
		return "", fmt.Errorf("postgres: %w", err)
	}
	defer f.Close()
	if cred != nil {
		if err := f.Chown(int(cred.Uid), int(cred.Gid)); err != nil {
			return "", fmt.Errorf("postgres: %w", err)
		}
	}
	if _, err := f.WriteString(password + "\n"); err != nil {
		return "", fmt.Errorf("postgres: %w", err)
	}
	return f.Name(), nil
}

// randomPassword returns 24 random bytes in hex.
func randomPassword() (string, error) {
	buf := make([]byte, 24)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("generate a password: %w", err)
	}
	return hex.EncodeToString(buf), nil
}

// URL returns the connection URL of the given database on this server.
func (p *Postgres) URL(database string) string {
	return fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/%s?sslmode=disable", p.cfg.Password, p.cfg.Port, database)
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

// fallbackRoot holds the clusters whose own place the server's user cannot
// reach.
var fallbackRoot = "/var/lib/agentbus"

// reachableDir returns where the cluster of dir lives: dir itself when
// cred's user can reach it, else a directory of its own under fallbackRoot
// that dir links to. Postgres refuses to run as root, and a checkout under
// /root or in a 0700 home is closed to every other user; the link keeps
// dir the one place to look, and a later start finds the same cluster.
func reachableDir(dir string, cred *syscall.Credential) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if resolved, err := filepath.EvalSymlinks(abs); err == nil {
		abs = resolved
	}
	if traversable(filepath.Dir(abs), cred) {
		return abs, nil
	}
	sum := sha256.Sum256([]byte(abs))
	home := filepath.Join(fallbackRoot, "postgres-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(fallbackRoot, 0o755); err != nil {
		return "", fmt.Errorf("postgres: %w", err)
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", fmt.Errorf("postgres: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return "", err
	}
	// An empty directory is what a start that failed here left behind.
	if err := os.Remove(abs); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("postgres: %s holds a cluster its server's user (uid %d) cannot reach: %w", abs, cred.Uid, err)
	}
	if err := os.Symlink(home, abs); err != nil {
		return "", fmt.Errorf("postgres: %w", err)
	}
	return home, nil
}

// traversable reports whether cred's user may pass through dir and each of
// its parents.
func traversable(dir string, cred *syscall.Credential) bool {
	for {
		var st unix.Stat_t
		if err := unix.Stat(dir, &st); err != nil {
			return false
		}
		bit := uint32(0o001)
		switch {
		case st.Uid == cred.Uid:
			bit = 0o100
		case st.Gid == cred.Gid:
			bit = 0o010
		}
		if st.Mode&bit == 0 {
			return false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return true
		}
		dir = parent
	}
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
