package reactions

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
)

// PoolConsumer is the durable consumer of the pool reaction. Renaming it
// replays every event to it: keep it stable.
const PoolConsumer = "pool"

// endingEvents are the events after which a session holds no pool slot.
var endingEvents = map[string]bool{
	"session_cancelled":         true,
	"agent_session_failed":      true,
	"agent_session_approved":    true,
	"agent_session_closed":      true,
	"agent_session_rejected":    true,
	"context_exhausted":         true,
	"session_voluntary_handoff": true,
}

// Pool allocates a slot to each new session, releases it when the session
// ends, and then starts the owner's oldest Queued session.
type Pool struct {
	JS     jetstream.JetStream
	DB     *pgxpool.Pool
	Client *command.Client
}

// Run consumes the session events until ctx ends.
func (p Pool) Run(ctx context.Context) error {
	return bus.Run(ctx, p.JS, bus.RunnerConfig{
		Stream: bus.StreamEvents, Consumer: PoolConsumer, Handler: p.Handle,
		Concurrency: 4, OrderKey: bus.BySubject,
		FilterSubjects: []string{"agents.evt.session.*.agent_session_created", "agents.evt.session.*.session_cancelled",
			"agents.evt.session.*.agent_session_failed", "agents.evt.session.*.agent_session_approved",
			"agents.evt.session.*.agent_session_closed", "agents.evt.session.*.agent_session_rejected",
			"agents.evt.session.*.context_exhausted", "agents.evt.session.*.session_voluntary_handoff"},
	})
}

// Handle reacts to one event.
func (p Pool) Handle(ctx context.Context, m jetstream.Msg) error {
	env, err := bus.DecodeEnvelope(m.Data())
	if err != nil {
		return bus.Permanent(err)
	}
	id, err := uuid.Parse(env.AggregateID)
	if err != nil {
		return bus.Permanent(err)
	}
	switch {
	case env.Type == "agent_session_created":
		_, err := p.do(ctx, env.ID, command.AllocateSession, id)
		return err
	case endingEvents[env.Type]:
		if _, err := p.do(ctx, env.ID, command.ReleaseSession, id); err != nil {
			return err
		}
		return p.startNextQueued(ctx, env)
	}
	return nil
}

// startNextQueued allocates the owner's oldest Queued session, if any.
func (p Pool) startNextQueued(ctx context.Context, cause bus.Envelope) error {
	var next uuid.UUID
	err := p.DB.QueryRow(ctx, `SELECT id FROM sessions WHERE owner_id = $1 AND status = $2 ORDER BY created_at LIMIT 1`,
		cause.OwnerID, string(domain.StatusQueued)).Scan(&next)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = p.do(ctx, cause.ID+"/next", command.AllocateSession, next)
	return err
}

// do sends a pool command on the session, derived from its cause.
func (p Pool) do(ctx context.Context, cause, name string, id uuid.UUID) (command.Result, error) {
	return doDerived(ctx, p.Client, "pool", cause+"/"+name, domain.AggregateSession, name, id, "", nil)
}

// allocated reports whether an AllocateSession result started the session.
func allocated(r command.Result) bool {
	var res command.AllocateResult
	return r.Err() == nil && json.Unmarshal(r.State, &res) == nil && res.Allocated
}
