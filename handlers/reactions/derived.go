package reactions

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/command"
)

// commandNamespace derives command ids from the events that cause them.
var commandNamespace = uuid.MustParse("9c4d2e1f-7a3b-4c5d-8e6f-0a1b2c3d4e5f")

// doDerived sends a command of a reaction under an id derived from key
// (the causing event and what the command is for), so that a redelivered
// event repeats the very same command, which changes nothing, and waits for
// its result. A refusal is logged for component and returned in the result,
// not as an error: the aggregate has moved on, and the same command would
// be refused again.
func doDerived(ctx context.Context, client *command.Client, component, key, aggregate, name string, id uuid.UUID, owner string, data any) (command.Result, error) {
	cmd, err := command.New(aggregate, name, id, owner, data)
	if err != nil {
		return command.Result{}, bus.Permanent(err)
	}
	cmd.ID = uuid.NewSHA1(commandNamespace, []byte(key))
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := client.Do(ctx, cmd)
	if err != nil {
		return r, fmt.Errorf("%s %s: %w", name, id, err)
	}
	if e, ok := command.AsError(r.Err()); ok {
		slog.Info("command refused", "component", component, "aggregate_id", id, "command", name,
			"kind", e.Kind, "error", e.Message)
	}
	return r, nil
}

// decodeEvent reads the envelope of a domain event and the id of its
// aggregate; an event that has neither can never be handled, and is final.
func decodeEvent(m jetstream.Msg) (bus.Envelope, uuid.UUID, error) {
	env, err := bus.DecodeEnvelope(m.Data())
	if err != nil {
		return env, uuid.Nil, bus.Permanent(err)
	}
	id, err := uuid.Parse(env.AggregateID)
	if err != nil {
		return env, uuid.Nil, bus.Permanent(err)
	}
	return env, id, nil
}
