// Package reactions holds the workers that make the session flows run by
// themselves: each consumes AGENTS_EVENTS on a durable consumer of its own
// and reacts to domain events with commands, to the aggregates or to the
// sidecars.
package reactions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/command/control"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// sidecarNamespace derives sidecar command ids from the events that cause
// them, so that a redelivered event produces the same command, which
// JetStream and the relay then write once.
var sidecarNamespace = uuid.MustParse("1b7e3c52-8f0d-4a6e-b2c4-9d5f7e1a3c08")

// sendToSidecar publishes a command on agents.sidecar.<id>.commands.<type>.
func sendToSidecar(ctx context.Context, js jetstream.JetStream, sessionID, ownerID string, cause, typ string, data any) error {
	return sendToSidecarAs(ctx, js, sessionID, ownerID, uuid.NewSHA1(sidecarNamespace, []byte(cause+"/"+typ)), typ, data)
}

// sendToSidecarAs publishes a command under the id the session chose for
// it: the command whose ack the session awaits.
func sendToSidecarAs(ctx context.Context, js jetstream.JetStream, sessionID, ownerID string, id uuid.UUID, typ string, data any) error {
	msg, err := sidecarMsg(ctx, sessionID, ownerID, id, typ, data)
	if err != nil {
		return bus.Permanent(err)
	}
	if _, err := bus.PublishMsg(ctx, js, msg); err != nil {
		return fmt.Errorf("send %s to sidecar %s: %w", typ, sessionID, err)
	}
	return nil
}

// sidecarMsg is the message of a command for a session's sidecar.
func sidecarMsg(ctx context.Context, sessionID, ownerID string, id uuid.UUID, typ string, data any) (*nats.Msg, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	env := bus.Envelope{
		ID:          id.String(),
		Type:        typ,
		Aggregate:   domain.AggregateSession,
		AggregateID: sessionID,
		OwnerID:     ownerID,
		OccurredAt:  time.Now().UTC(),
		Data:        raw,
	}
	return bus.NewMsg(ctx, bus.SidecarCommandSubject(sessionID, typ), env)
}

// SidecarDispatchConsumer is the durable consumer of the sidecar dispatch
// reaction. Renaming it replays every event to it: keep it stable.
const SidecarDispatchConsumer = "sidecar-dispatch"

// SidecarDispatch turns the session's requests, answers and decisions into
// commands for its sidecar (seed 8.3, "Command Stream -> Sidecar").
type SidecarDispatch struct {
	JS jetstream.JetStream
	// DB is where a reload finds the session, its template and its skills.
	DB *pgxpool.Pool
}

// Run consumes the session events until ctx ends.
func (d SidecarDispatch) Run(ctx context.Context) error {
	return bus.Run(ctx, d.JS, bus.RunnerConfig{
		Stream: bus.StreamEvents, Consumer: SidecarDispatchConsumer, Handler: d.Handle,
		Concurrency: 4, OrderKey: bus.BySubject,
		FilterSubjects: []string{bus.AggregateEventsFilter(domain.AggregateSession)},
	})
}

// Handle maps one event to at most one sidecar command.
func (d SidecarDispatch) Handle(ctx context.Context, m jetstream.Msg) error {
	env, err := bus.DecodeEnvelope(m.Data())
	if err != nil {
		return bus.Permanent(err)
	}
	send := func(typ string, data any) error {
		return sendToSidecar(ctx, d.JS, env.AggregateID, env.OwnerID, env.ID, typ, data)
	}
	if c, ok := control.ByRequested(env.Type); ok {
		return d.sendControl(ctx, env, c)
	}
	switch env.Type {
	case domain.SessionInputReceivedEvent{}.EventType():
		var e domain.SessionInputReceivedEvent
		if err := json.Unmarshal(env.Data, &e); err != nil {
			return bus.Permanent(err)
		}
		return send(protocol.CommandAnswerQuestion, protocol.AnswerQuestion{Answer: e.Answer})
	case domain.SessionPlanApprovedEvent{}.EventType():
		approved := true
		return send(protocol.CommandPlanDecision, protocol.PlanDecision{Approved: &approved})
	case domain.SessionPlanRejectedEvent{}.EventType():
		var e domain.SessionPlanRejectedEvent
		if err := json.Unmarshal(env.Data, &e); err != nil {
			return bus.Permanent(err)
		}
		approved := false
		return send(protocol.CommandPlanDecision, protocol.PlanDecision{Approved: &approved, Feedback: e.Feedback})
	case domain.ToolPermissionGrantedEvent{}.EventType(), domain.ToolPermissionDeniedEvent{}.EventType():
		var e domain.ToolPermissionGrantedEvent
		if err := json.Unmarshal(env.Data, &e); err != nil {
			return bus.Permanent(err)
		}
		behavior := protocol.BehaviorAllow
		if env.Type == (domain.ToolPermissionDeniedEvent{}).EventType() {
			behavior = protocol.BehaviorDeny
		}
		return send(protocol.CommandPermissionResponse, protocol.PermissionResponse{RequestID: e.RequestID, Behavior: behavior, Message: e.Message})
	case domain.ToolPermissionTimedOutEvent{}.EventType():
		var e domain.ToolPermissionTimedOutEvent
		if err := json.Unmarshal(env.Data, &e); err != nil {
			return bus.Permanent(err)
		}
		if e.Behavior != domain.TimeoutFail {
			return nil // the tool_permission_granted or _denied that follows answers the sidecar
		}
		return send(protocol.CommandPermissionResponse, protocol.PermissionResponse{RequestID: e.RequestID, Behavior: protocol.BehaviorDeny,
			Message: "no decision within the permission timeout"})
	}
	return nil
}

// sendControl sends the sidecar command of a two-phase control's request.
// The request names the command's id: the session confirms only the ack
// that echoes it.
func (d SidecarDispatch) sendControl(ctx context.Context, env bus.Envelope, c control.Control) error {
	var awaited struct {
		CommandID uuid.UUID `json:"commandId"`
	}
	if err := json.Unmarshal(env.Data, &awaited); err != nil || awaited.CommandID == uuid.Nil {
		return bus.Permanent(fmt.Errorf("%s %s names no command id", env.Type, env.ID))
	}
	send := func(data any) error {
		return sendToSidecarAs(ctx, d.JS, env.AggregateID, env.OwnerID, awaited.CommandID, string(c.Sidecar), data)
	}
	if c.SidecarData != nil {
		data, err := c.SidecarData(env.Data)
		if err != nil {
			return bus.Permanent(fmt.Errorf("%s %s: %w", env.Type, env.ID, err))
		}
		return send(data)
	}
	compose, ok := composed[c.Sidecar]
	if !ok {
		return bus.Permanent(fmt.Errorf("no data for the sidecar command %s of %s", c.Sidecar, env.Type))
	}
	return compose(d, ctx, env, send)
}

// composed compose the data of the control commands whose row has no
// SidecarData, from the session as it is when the request is handled.
var composed = map[domain.SidecarCommand]func(SidecarDispatch, context.Context, bus.Envelope, func(any) error) error{
	domain.SidecarReload: SidecarDispatch.reload,
}

// Every control without SidecarData must have its data composed here: a
// row added without it stops the workers at start rather than
// dead-lettering its first request.
func init() {
	for _, c := range control.All() {
		if c.SidecarData == nil && composed[c.Sidecar] == nil {
			panic(fmt.Sprintf("control %s: the sidecar-dispatch reaction cannot compose the data of %s", c.Name, c.Sidecar))
		}
	}
}

// reload sends the session's newly composed config. It is composed when
// the reload is handled, from the session as it is then: a late reload
// never brings back an older set of skills.
func (d SidecarDispatch) reload(ctx context.Context, env bus.Envelope, send func(any) error) error {
	id, err := uuid.Parse(env.AggregateID)
	if err != nil {
		return bus.Permanent(err)
	}
	s, err := postgres.Sessions{}.Get(ctx, d.DB, id)
	if errors.Is(err, postgres.ErrNotFound) {
		return bus.Permanent(err)
	}
	if err != nil {
		return err
	}
	if !s.Status().HasSidecar() {
		return nil // it ended meanwhile
	}
	cfg, err := sidecarConfig(ctx, d.DB, s, "")
	if err != nil {
		return err
	}
	return send(protocol.ReloadConfig{Config: &cfg})
}
