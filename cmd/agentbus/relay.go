package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/agentbus/agentbus/relay"
)

func runRelay(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("relay", flag.ExitOnError)
	redisURL := fs.String("redis-url", os.Getenv("REDIS_URL"), "Redis holding the sessions' streams (default $REDIS_URL)")
	natsURL := fs.String("nats-url", envOr("NATS_URL", "nats://127.0.0.1:4222"), "NATS servers, comma-separated (default $NATS_URL)")
	httpAddr := fs.String("http", envOr("AGENTBUS_RELAY_HTTP", "127.0.0.1:8081"), "listen address of /healthz and /readyz; empty turns them off")
	name := fs.String("name", os.Getenv("AGENTBUS_RELAY_NAME"), "this relay's name among the relays (default: host name and a random suffix); a stable name lets a restarted relay resume its sessions at once")
	leaseTTL := fs.Duration("lease-ttl", 10*time.Second, "how long a dead relay's sessions wait before another relay takes them over")
	trimInterval := fs.Duration("trim-interval", 30*time.Second, "how often acknowledged entries are trimmed from the sessions' streams; 0 turns trimming off")
	trimKeep := fs.Int64("trim-keep", 1000, "acknowledged entries kept per stream as history")
	_ = fs.Parse(args)
	if *redisURL == "" {
		return errors.New("no Redis: set REDIS_URL or --redis-url")
	}
	if *trimInterval == 0 {
		*trimInterval = -1
	}

	in := &infra{}
	defer in.Close()
	if err := in.connectNATSWithEnvReplicas(ctx, *natsURL); err != nil {
		return err
	}
	if err := in.connectRedis(ctx, *redisURL); err != nil {
		return err
	}
	r, err := relay.New(relay.Config{
		Redis:        in.Redis,
		JetStream:    in.JS,
		Name:         *name,
		LeaseTTL:     *leaseTTL,
		TrimInterval: *trimInterval,
		TrimKeep:     *trimKeep,
		Logger:       slog.Default(),
	})
	if err != nil {
		return err
	}

	components := []component{{"relay", r.Run}}
	if *httpAddr != "" {
		checks := in.Checks()
		checks.Add("relay", func(context.Context) error {
			if !r.Ready() {
				return errors.New("not relaying yet")
			}
			return nil
		})
		mux := http.NewServeMux()
		checks.Register(mux)
		reg, err := in.Metrics()
		if err != nil {
			return err
		}
		srv := newHTTPServer(*httpAddr, withMetrics(mux, reg))
		components = append(components, component{"http", func(ctx context.Context) error { return serveHTTP(ctx, srv) }})
	}
	slog.Info("relay starting", "component", "relay", "relay", r.Name(), "nats", *natsURL, "http", *httpAddr)
	if err := runComponents(ctx, components); err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	return nil
}
