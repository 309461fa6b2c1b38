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
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres/queries"
)

// NotifyConsumer is the durable consumer of the notification reaction.
// Renaming it replays every event to it: keep it stable.
const NotifyConsumer = "notify"

// AggregateNotification is the second token of a notification's subject,
// agents.evt.notification.<ownerId>.<kind>: notifications are grouped by
// the person they are for.
const AggregateNotification = "notification"

// The notification kinds, the last token of a notification's subject.
const (
	NotifySessionCompleted    = "session_completed"
	NotifySessionFailed       = "session_failed"
	NotifyBudgetWarning       = "budget_warning"
	NotifyBudgetExhausted     = "budget_exhausted"
	NotifyChainCompleted      = "chain_completed"
	NotifyAutoContinueStopped = "auto_continue_stopped"
)

// NotifyContextExhausted is the kind of the notification of the event it
// is named after.
var NotifyContextExhausted = domain.ContextExhaustedEvent{}.EventType()

// notificationNamespace derives notification ids from their source
// events, so that a redelivered event yields the same Nats-Msg-Id and
// JetStream stores the notification once.
var notificationNamespace = uuid.MustParse("5e2a9c71-3d48-4f0b-9a6e-c1d7b8f24e93")

// Notification is the data of a notification event: what happened to
// which session, told to its owner.
type Notification struct {
	SessionID     string    `json:"sessionId,omitempty"`
	ChainID       string    `json:"chainId,omitempty"`
	OwnerID       string    `json:"ownerId"`
	Kind          string    `json:"kind"`
	Title         string    `json:"title"`
	Message       string    `json:"message"`
	SourceEventID string    `json:"sourceEventId"`
	OccurredAt    time.Time `json:"occurredAt"`
}

// notifyTriggers are the events seed 001 §8.10 sends a notification for.
var notifyTriggers = []string{
	bus.EventFilter(domain.AgentSessionApprovedEvent{}),
	bus.EventFilter(domain.AgentSessionFailedEvent{}),
	bus.EventFilter(domain.SessionBudgetWarningEvent{}),
	bus.EventFilter(domain.SessionBudgetExhaustedEvent{}),
	bus.EventFilter(domain.ContextExhaustedEvent{}),
	bus.EventFilter(domain.SessionChainCompletedEvent{}),
}

// Notify is the application side of the Notification context: it turns
// the events a person must hear about (completion, failure, budget alerts,
// context exhaustion, a finished chain) into notification events, which a
// delivery channel (e-mail, push, the UI) picks up from AGENTS_EVENTS.
type Notify struct {
	JS jetstream.JetStream
	DB *pgxpool.Pool
}

// Run consumes the triggering events until ctx ends.
func (n Notify) Run(ctx context.Context) error {
	return bus.Run(ctx, n.JS, bus.RunnerConfig{
		Stream: bus.StreamEvents, Consumer: NotifyConsumer, Handler: n.Handle,
		Concurrency: 4, OrderKey: bus.BySubject, FilterSubjects: notifyTriggers,
	})
}

// Handle publishes the notification of one event.
func (n Notify) Handle(ctx context.Context, m jetstream.Msg) error {
	env, err := bus.DecodeEnvelope(m.Data())
	if err != nil {
		return bus.Permanent(err)
	}
	note, ok, err := describe(env)
	if err != nil || !ok {
		return err
	}
	if env.OwnerID == "" {
		if env.OwnerID, err = n.owner(ctx, env); err != nil {
			return err
		}
	}
	return publishNotification(ctx, n.JS, env, note)
}

// describe writes the notification of env, without its owner; ok is
// false for an event that notifies nobody.
func describe(env bus.Envelope) (note Notification, ok bool, err error) {
	switch env.Type {
	case domain.AgentSessionApprovedEvent{}.EventType():
		note = Notification{Kind: NotifySessionCompleted, Title: "Session completed",
			Message: "The session's output was approved; the work is done."}
	case domain.AgentSessionFailedEvent{}.EventType():
		var e domain.AgentSessionFailedEvent
		if err := json.Unmarshal(env.Data, &e); err != nil {
			return note, false, bus.Permanent(err)
		}
		msg := fmt.Sprintf("The session failed (%s).", e.FailureReason)
		if e.Message != "" {
			msg = fmt.Sprintf("The session failed (%s): %s", e.FailureReason, e.Message)
		}
		note = Notification{Kind: NotifySessionFailed, Title: "Session failed", Message: msg}
	case domain.SessionBudgetWarningEvent{}.EventType():
		var e domain.SessionBudgetWarningEvent
		if err := json.Unmarshal(env.Data, &e); err != nil {
			return note, false, bus.Permanent(err)
		}
		note = Notification{Kind: NotifyBudgetWarning, Title: "Budget warning",
			Message: fmt.Sprintf("The session spent $%s of its $%s budget (%.0f%%).", e.SpentUsd, e.CapUsd, e.PercentUsed)}
	case domain.SessionBudgetExhaustedEvent{}.EventType():
		var e domain.SessionBudgetExhaustedEvent
		if err := json.Unmarshal(env.Data, &e); err != nil {
			return note, false, bus.Permanent(err)
		}
		note = Notification{Kind: NotifyBudgetExhausted, Title: "Budget exhausted",
			Message: fmt.Sprintf("The session spent $%s and reached its $%s cap; it is paused until the budget is raised.", e.SpentUsd, e.CapUsd)}
	case domain.ContextExhaustedEvent{}.EventType():
		note = Notification{Kind: NotifyContextExhausted, Title: "Context exhausted",
			Message: "The session's context window is full; the work continues in a new session of its chain."}
	case domain.SessionChainCompletedEvent{}.EventType():
		var e domain.SessionChainCompletedEvent
		if err := json.Unmarshal(env.Data, &e); err != nil {
			return note, false, bus.Permanent(err)
		}
		note = Notification{Kind: NotifyChainCompleted, Title: "Chain completed", ChainID: env.AggregateID,
			Message: fmt.Sprintf("The chain finished after %d sessions, costing $%s in all.", e.TotalSessions, e.TotalCostUsd)}
	default:
		return note, false, nil
	}
	if env.Aggregate != domain.AggregateChain {
		note.SessionID = env.AggregateID
	}
	return note, true, nil
}

// owner looks up the owner of the event's aggregate, for an event that
// does not name it.
func (n Notify) owner(ctx context.Context, env bus.Envelope) (string, error) {
	aggregate := domain.AggregateSession
	if env.Aggregate == domain.AggregateChain {
		aggregate = domain.AggregateChain
	}
	id, err := uuid.Parse(env.AggregateID)
	if err != nil {
		return "", bus.Permanent(err)
	}
	owner, err := queries.OwnerOf(ctx, n.DB, aggregate, id)
	if errors.Is(err, queries.ErrNotFound) {
		return "", bus.Permanent(fmt.Errorf("%s %s has no owner: it does not exist", env.Aggregate, id))
	}
	return owner.String(), err
}

// publishNotification publishes note for the owner of its source event.
// Its id, and so its Nats-Msg-Id, is derived from the source event and
// the kind, and it carries the source event's time: a redelivered source
// publishes the very same message, which JetStream drops.
func publishNotification(ctx context.Context, js jetstream.JetStream, source bus.Envelope, note Notification) error {
	note.OwnerID = source.OwnerID
	note.SourceEventID = source.ID
	note.OccurredAt = source.OccurredAt.UTC()
	raw, err := json.Marshal(note)
	if err != nil {
		return bus.Permanent(err)
	}
	env := bus.Envelope{
		ID:          uuid.NewSHA1(notificationNamespace, []byte(source.ID+"/"+note.Kind)).String(),
		Type:        note.Kind,
		Aggregate:   AggregateNotification,
		AggregateID: note.OwnerID,
		OwnerID:     note.OwnerID,
		OccurredAt:  note.OccurredAt,
		Data:        raw,
	}
	msg, err := bus.NewMsg(ctx, bus.EventSubject(AggregateNotification, note.OwnerID, note.Kind), env)
	if err != nil {
		return bus.Permanent(err)
	}
	if _, err := bus.PublishMsg(ctx, js, msg); err != nil {
		return fmt.Errorf("publish %s notification for %s: %w", note.Kind, note.OwnerID, err)
	}
	return nil
}
