package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/domain"
)

// Consumer is this worker's durable consumer. JetStream remembers what it
// has handled under this name: renaming it sends every past failure again.
const Consumer = "webhook-session-failed"

func run(ctx context.Context, natsURL, webhookURL string) error {
	if webhookURL == "" {
		return errors.New("set WEBHOOK_URL")
	}
	nc, js, err := bus.Connect(ctx, natsURL)
	if err != nil {
		return err
	}
	defer nc.Close()
	return Run(ctx, js, webhookURL)
}

// Run posts every agent_session_failed event to webhookURL until ctx ends.
// The runner acks a delivered webhook, retries with backoff when the
// receiver fails, and dead-letters the event after the last attempt.
func Run(ctx context.Context, js jetstream.JetStream, webhookURL string) error {
	client := &http.Client{Timeout: 10 * time.Second}
	return bus.Run(ctx, js, bus.RunnerConfig{
		Stream:         bus.StreamEvents,
		Consumer:       Consumer,
		FilterSubjects: []string{bus.EventFilter(domain.AgentSessionFailedEvent{})},
		Handler: func(ctx context.Context, m jetstream.Msg) error {
			env, err := bus.DecodeEnvelope(m.Data())
			if err != nil {
				return bus.Permanent(err)
			}
			body, _ := json.Marshal(map[string]any{
				"event": env.Type, "sessionId": env.AggregateID, "ownerId": env.OwnerID,
				"occurredAt": env.OccurredAt, "details": env.Data,
			})
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, webhookURL, bytes.NewReader(body))
			if err != nil {
				return bus.Permanent(err)
			}
			req.Header.Set("Content-Type", "application/json")
			// The event id lets the receiver drop the repeats that
			// at-least-once delivery may bring.
			req.Header.Set("Idempotency-Key", env.ID)
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode >= 300 {
				return fmt.Errorf("webhook answered %s", resp.Status)
			}
			return nil
		},
	})
}
