package localserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisConfig says where and how to run a private Redis server.
type RedisConfig struct {
	// Dir holds the append-only file.
	Dir string
	// Port is the loopback TCP port to listen on.
	Port int
	// Durable turns on the append-only file. With appendfsync everysec
	// (Redis's default) a machine crash may lose up to one second of raw
	// events the relay has not yet forwarded; appendfsync always closes
	// that window at the cost of an fsync per write.
	Durable bool
	// Log receives the server's output; nil discards it.
	Log *os.File
	// Users are the server's ACL users. When there are any, the default
	// user is off and the server reads them from users.acl in Dir, written
	// again on every start, so a restarted server keeps them; URL names the
	// first. None leaves the default user open to anyone, which only the
	// tests' throwaway servers do.
	Users []RedisUser
}

// RedisUser is an ACL user of a private Redis server.
type RedisUser struct {
	// Name is the user's name.
	Name string
	// Password is the user's password; the ACL file keeps only its SHA-256.
	Password string
	// Rules are the user's ACL rules, e.g. "~* &* +@all".
	Rules string
}

// Redis is a running private Redis server.
type Redis struct {
	cfg  RedisConfig
	cmd  *exec.Cmd
	done chan struct{}
}

// StartRedis starts redis-server and waits until it answers PING.
func StartRedis(ctx context.Context, cfg RedisConfig) (*Redis, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found: install Debian's redis-server package (make deps) or set REDIS_URL")
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	appendonly := "no"
	if cfg.Durable {
		appendonly = "yes"
	}
	args := []string{
		"--port", strconv.Itoa(cfg.Port),
		"--bind", "127.0.0.1",
		"--dir", cfg.Dir,
		"--appendonly", appendonly,
		"--appendfsync", "everysec",
		"--maxmemory-policy", "noeviction",
		// Keyevent notifications of stream commands: the relay learns from
		// them which streams got new entries, instead of reading them all.
		"--notify-keyspace-events", "Et",
		"--save", "",
		"--daemonize", "no",
	}
	if len(cfg.Users) > 0 {
		aclFile, err := writeACLFile(cfg.Dir, cfg.Users)
		if err != nil {
			return nil, err
		}
		args = append(args, "--aclfile", aclFile)
	}
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	if cfg.Log != nil {
		cmd.Stdout, cmd.Stderr = cfg.Log, cfg.Log
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	r := &Redis{cfg: cfg, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(r.done) }()
	if err := r.waitReady(ctx); err != nil {
		r.Stop()
		return nil, err
	}
	return r, nil
}

// URL returns the server's redis:// URL, with the first user's name and
// password when it has users.
func (r *Redis) URL() string {
	if len(r.cfg.Users) == 0 {
		return fmt.Sprintf("redis://127.0.0.1:%d/0", r.cfg.Port)
	}
	return r.UserURL(r.cfg.Users[0])
}

// UserURL returns the server's redis:// URL with user's name and password.
func (r *Redis) UserURL(user RedisUser) string {
	u := url.URL{Scheme: "redis", User: url.UserPassword(user.Name, user.Password),
		Host: fmt.Sprintf("127.0.0.1:%d", r.cfg.Port), Path: "/0"}
	return u.String()
}

// Port returns the port the server listens on.
func (r *Redis) Port() int { return r.cfg.Port }

func (r *Redis) waitReady(ctx context.Context) error {
	opts, err := redis.ParseURL(r.URL())
	if err != nil {
		return err
	}
	client := redis.NewClient(opts)
	defer client.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-r.done:
			return fmt.Errorf("redis-server exited during start-up (see its log)")
		default:
		}
		err := client.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis on port %d not ready: %w", r.cfg.Port, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop shuts the server down (SIGTERM flushes the append-only file) and waits.
func (r *Redis) Stop() {
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(15 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}

// Kill stops the server abruptly, as a crash would; tests use it.
func (r *Redis) Kill() {
	_ = r.cmd.Process.Kill()
	<-r.done
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	return freePort()
}

// Restart starts a new server on the same directory and port, as an
// operator restarting Redis would; the append-only file brings the data back.
func (r *Redis) Restart(ctx context.Context) (*Redis, error) {
	return StartRedis(ctx, r.cfg)
}

// writeACLFile writes the users of a server to users.acl in dir, with the
// default user off, and returns its path. It keeps only the SHA-256 of
// each password. Users that others add at run time (ACL SETUSER) live in
// memory only; their owners restore them after a restart.
func writeACLFile(dir string, users []RedisUser) (string, error) {
	var b strings.Builder
	// No client can log in as the default user (off, no password), but
	// Redis 7.0 replays the transactions of the append-only file (which is
	// what a script's writes become) as that user, under its rules: without
	// every permission, each one is refused and lost at the next start.
	b.WriteString("user default off resetpass ~* &* +@all\n")
	for _, u := range users {
		if u.Name == "" || u.Name == "default" || strings.ContainsAny(u.Name, " \n") ||
			u.Password == "" || strings.Contains(u.Rules, "\n") {
			return "", fmt.Errorf("redis: bad user %q", u.Name)
		}
		sum := sha256.Sum256([]byte(u.Password))
		fmt.Fprintf(&b, "user %s on #%s %s\n", u.Name, hex.EncodeToString(sum[:]), u.Rules)
	}
	path := filepath.Join(dir, "users.acl")
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return "", fmt.Errorf("redis: %w", err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return "", fmt.Errorf("redis: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("redis: %w", err)
	}
	return path, nil
}
