package reactions

import (
	"context"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
)

// PoolConsumer is the durable consumer of the pool reaction. Renaming it
// replays every event to it: keep it stable.
const PoolConsumer = "pool"

// waitingEvents are the events after which a session waits Queued for a
// slot: a new session, and a failed one retried.
var waitingEvents = map[string]bool{
	domain.AgentSessionCreatedEvent{}.EventType(): true,
	domain.AgentSessionRetriedEvent{}.EventType(): true,
}

// endingEvents are the events after which a session holds no pool slot.
var endingEvents = map[string]bool{
	domain.SessionCancelledEvent{}.EventType():        true,
	domain.AgentSessionFailedEvent{}.EventType():      true,
	domain.AgentSessionApprovedEvent{}.EventType():    true,
	domain.AgentSessionClosedEvent{}.EventType():      true,
	domain.AgentSessionRejectedEvent{}.EventType():    true,
	domain.ContextExhaustedEvent{}.EventType():        true,
	domain.SessionVoluntaryHandoffEvent{}.EventType(): true,
}

// Pool asks for a slot for each session that waits for one, and releases
// the slot of each session that ends; a release starts as many of the
// owner's Queued sessions as there are free slots.
type Pool struct {
	JS     jetstream.JetStream
	Client *command.Client
}

// Run consumes the session events until ctx ends.
func (p Pool) Run(ctx context.Context) error {
	return bus.Run(ctx, p.JS, bus.RunnerConfig{
		Stream: bus.StreamEvents, Consumer: PoolConsumer, Handler: p.Handle,
		Concurrency: 4, OrderKey: bus.BySubject, FilterSubjects: PoolFilters(),
	})
}

// Handle reacts to one event.
func (p Pool) Handle(ctx context.Context, m jetstream.Msg) error {
	env, id, err := decodeEvent(m)
	if err != nil {
		return err
	}
	switch {
	case waitingEvents[env.Type]:
		_, err = p.do(ctx, env.ID, command.AllocateSession, id)
	case endingEvents[env.Type]:
		_, err = p.do(ctx, env.ID, command.ReleaseSession, id)
	}
	return err
}

// do sends a pool command on the session, derived from its cause.
func (p Pool) do(ctx context.Context, cause, name string, id uuid.UUID) (command.Result, error) {
	return doDerived(ctx, p.Client, "pool", cause+"/"+name, domain.AggregateSession, name, id, "", nil)
}
