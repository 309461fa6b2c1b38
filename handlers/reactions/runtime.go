package reactions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/relay"
	"github.com/agentbus/agentbus/sidecar/launcher"
)

// RuntimeConsumer is the durable consumer of the runtime reaction.
// Renaming it replays every event to it: keep it stable.
const RuntimeConsumer = "runtime"

// Runtime is the seed's IAgentRuntime: when a session gets a pool slot it
// has the relay carry the session's streams and starts the session's
// sidecar through the launcher (in external mode the launcher starts
// nothing and someone else runs the sidecar); when the session ends it
// lets the relay drain and stop.
type Runtime struct {
	JS       jetstream.JetStream
	DB       *pgxpool.Pool
	Launcher *launcher.Launcher
	// Client issues each sidecar its agent API key (IssueSidecarKey).
	Client *command.Client
	// Engine is the sidecar engine: script (default) or claude.
	Engine string
}

// Run consumes the allocation and ending events until ctx ends.
func (r Runtime) Run(ctx context.Context) error {
	if err := r.Launcher.Start(ctx); err != nil {
		return err
	}
	defer r.Launcher.Close()
	return bus.Run(ctx, r.JS, bus.RunnerConfig{
		Stream: bus.StreamEvents, Consumer: RuntimeConsumer, Handler: r.Handle,
		Concurrency: 4, OrderKey: bus.BySubject,
		FilterSubjects: []string{"agents.evt.session.*.session_allocated", "agents.evt.session.*.session_released"},
	})
}

// Handle starts or lets go of one session's sidecar.
func (r Runtime) Handle(ctx context.Context, m jetstream.Msg) error {
	env, err := bus.DecodeEnvelope(m.Data())
	if err != nil {
		return bus.Permanent(err)
	}
	id, err := uuid.Parse(env.AggregateID)
	if err != nil {
		return bus.Permanent(err)
	}
	kv, err := relay.SessionsKV(ctx, r.JS)
	if err != nil {
		return err
	}
	if env.Type == "session_released" {
		return relay.Deactivate(ctx, kv, id.String())
	}
	s, err := postgres.Sessions{}.Get(ctx, r.DB, id)
	if errors.Is(err, postgres.ErrNotFound) {
		return bus.Permanent(err)
	}
	if err != nil {
		return err
	}
	if !s.Status().HasSidecar() {
		return nil // it ended before its sidecar started
	}
	if err := relay.Activate(ctx, kv, id.String()); err != nil {
		return err
	}
	if _, running := r.Launcher.PID(id.String()); running {
		return nil // a redelivered allocation
	}
	cfg, err := sidecarConfig(ctx, r.DB, s, r.Engine)
	if err != nil {
		return err
	}
	key, err := r.sidecarKey(ctx, id)
	if err != nil || key == "" {
		return err
	}
	_, err = r.Launcher.StartSession(ctx, cfg, key)
	return err
}

// sidecarKey issues a new agent API key for the sidecar about to start,
// or returns "" when the session ended meanwhile. A fresh command id each
// time: the key is only in the live reply, and a sidecar started again
// gets a new key, which retires the old one.
func (r Runtime) sidecarKey(ctx context.Context, id uuid.UUID) (string, error) {
	cmd, err := command.New(domain.AggregateSession, command.IssueSidecarKey, id, "", nil)
	if err != nil {
		return "", bus.Permanent(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := r.Client.Do(ctx, cmd)
	if err != nil {
		return "", fmt.Errorf("issue sidecar key of %s: %w", id, err)
	}
	if res.Err() != nil {
		return "", nil
	}
	var out command.IssueSidecarKeyResult
	if err := json.Unmarshal(res.State, &out); err != nil || out.APIKey == "" {
		return "", fmt.Errorf("issue sidecar key of %s: no key in the reply", id)
	}
	return out.APIKey, nil
}
