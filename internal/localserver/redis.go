package localserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	// Password, when set, turns the default user off: clients log in as
	// User with it. Empty leaves the default user open, for tests' own
	// servers that nothing else runs beside.
	Password string
}

// User is the Redis user a server started with a Password has: every right,
// for the process that started it.
const User = "agentbus"

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
	if cfg.Password != "" {
		acl, err := writeACL(cfg.Dir, cfg.Password)
		if err != nil {
			return nil, err
		}
		args = append(args, "--aclfile", acl)
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

// writeACL writes the server's users: the default user off, and User
// with every right and password. Redis reads the file at each start, so the
// users survive a restart; the per-session users a launcher adds at run
// time are not in it, and the launcher restores them itself.
func writeACL(dir, password string) (string, error) {
	sum := sha256.Sum256([]byte(password))
	path := filepath.Join(dir, "users.acl")
	content := "user default off resetpass -@all\nuser " + User + " on #" + hex.EncodeToString(sum[:]) + " ~* &* +@all\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return "", fmt.Errorf("redis: %w", err)
	}
	return path, nil
}

// URL returns the server's redis:// URL, with its user and password when
// it has them.
func (r *Redis) URL() string {
	if r.cfg.Password != "" {
		return fmt.Sprintf("redis://%s:%s@127.0.0.1:%d/0", User, r.cfg.Password, r.cfg.Port)
	}
	return fmt.Sprintf("redis://127.0.0.1:%d/0", r.cfg.Port)
}

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
