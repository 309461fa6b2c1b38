package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/handlers/webhooks"
)

// The webhooks worker: the events of each owner's sessions, signed and
// posted to their webhook endpoints.
func init() {
	workers["webhooks"] = worker{
		summary: "post the events of each owner's sessions, signed, to their webhook endpoints (" + webhooks.AllowPrivateEnv +
			", AGENTBUS_WEBHOOK_RETRY_SCHEDULE, AGENTBUS_WEBHOOK_TIMEOUT, AGENTBUS_WEBHOOK_DISABLE_AFTER)",
		needs: needPostgres | needNATS,
		// The enqueuer's handlers, the dispatcher's listener and polls,
		// and the endpoints' loops, which take a connection only to claim
		// and to record.
		conns: func() int { return 8 },
		// One unacknowledged at a time: a crashed worker's event comes back
		// before later ones.
		consumes: []consumer{reaction(bus.StreamEvents, webhooks.Consumer,
			"Enqueues a delivery of each session event for every webhook of its owner that wants it.", webhooks.FilterSubject).
			with(func(c *jetstream.ConsumerConfig) {
				c.FilterSubjects, c.FilterSubject, c.MaxAckPending = []string{c.FilterSubject}, "", 1
			})},
		deploy: deployment{
			note: "Its links to sessions name the API at AGENTBUS_API_URL.",
			env:  []string{"AGENTBUS_API_URL: ${AGENTBUS_PUBLIC_URL:-http://localhost:8080}"},
		},
		run: func(ctx context.Context, in *infra) error {
			cfg, err := webhookConfig()
			if err != nil {
				return err
			}
			reg, err := in.Metrics()
			if err != nil {
				return err
			}
			cfg.DB, cfg.JS, cfg.Metrics = in.Pool, in.JS, reg
			cfg.LinkBase = envOr("AGENTBUS_API_URL", in.APIURL)
			w, err := webhooks.New(cfg)
			if err != nil {
				return err
			}
			return w.Run(ctx)
		},
	}
}

// webhookConfig reads the webhooks worker's settings from the environment.
func webhookConfig() (webhooks.Config, error) {
	cfg := webhooks.Config{AllowPrivate: os.Getenv(webhooks.AllowPrivateEnv) == "1"}
	if v := os.Getenv("AGENTBUS_WEBHOOK_RETRY_SCHEDULE"); v != "" {
		for _, part := range strings.Split(v, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(part))
			if err != nil || d <= 0 {
				return cfg, fmt.Errorf("AGENTBUS_WEBHOOK_RETRY_SCHEDULE=%q: want positive durations separated by commas, such as 5s,5m,30m", v)
			}
			cfg.RetrySchedule = append(cfg.RetrySchedule, d)
		}
	}
	if v := os.Getenv("AGENTBUS_WEBHOOK_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return cfg, fmt.Errorf("AGENTBUS_WEBHOOK_TIMEOUT=%q: want a positive duration such as 10s", v)
		}
		cfg.AttemptTimeout = d
	}
	if v := os.Getenv("AGENTBUS_WEBHOOK_DISABLE_AFTER"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("AGENTBUS_WEBHOOK_DISABLE_AFTER=%q: want a positive number", v)
		}
		cfg.DisableAfter = n
	}
	if v := os.Getenv("AGENTBUS_WEBHOOK_POLL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return cfg, fmt.Errorf("AGENTBUS_WEBHOOK_POLL=%q: want a positive duration such as 1s", v)
		}
		cfg.PollInterval = d
	}
	return cfg, nil
}
