package localserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
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
	cmd := exec.Command(bin,
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
	)
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

// URL returns the server's redis:// URL.
func (r *Redis) URL() string {
	return fmt.Sprintf("redis://127.0.0.1:%d/0", r.cfg.Port)
}

func (r *Redis) waitReady(ctx context.Context) error {
	client := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", r.cfg.Port)})
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
