// Command webhook is an example of adding a worker to agentbus without
// touching the rest: it POSTs a JSON notification to a URL whenever a
// session fails. Run it beside agentbus:
//
//	NATS_URL=nats://127.0.0.1:4222 WEBHOOK_URL=https://example.com/hook go run ./examples/webhook
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stderr, nil)))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	natsURL := os.Getenv("NATS_URL")
	if natsURL == "" {
		natsURL = "nats://127.0.0.1:4222"
	}
	if err := run(ctx, natsURL, os.Getenv("WEBHOOK_URL")); err != nil {
		slog.Error("webhook worker failed", "component", "webhook", "error", err)
		os.Exit(1)
	}
}
