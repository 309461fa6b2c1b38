package reactions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
)

// HandoffConsumer is the durable consumer of the handoff reaction.
// Renaming it replays every event to it: keep it stable.
const HandoffConsumer = "handoff"

// handoffTriggers are the events the handoff flow moves on.
var handoffTriggers = []string{
	bus.EventFilter(domain.ContextExhaustedEvent{}),
	bus.EventFilter(domain.SessionVoluntaryHandoffEvent{}),
	bus.EventFilter(domain.SessionHandoffInitiatedEvent{}),
	bus.EventFilter(domain.SessionChainCancelledEvent{}),
}

// Handoff runs the context exhaustion flow of seed 001 §8.10. When a
// session's context runs out, or its agent hands off, the session's chain
// is created if it has none. The handoff document reaches the chain
// through InitiateHandoff (the ACL sends it for handoff_document and
// voluntary_handoff); once the chain has it, Handoff starts the
// continuation session (same owner, working directory, model, budget,
// template and skills, with the handoff as its objective) and attaches it
// to the chain. The old session stays ContextExhausted, for the record.
// When a chain is cancelled, its live sessions are cancelled.
//
// Every command is derived from the causing event, so a redelivered event
// repeats commands the pipeline has handled already and changes nothing.
type Handoff struct {
	JS     jetstream.JetStream
	DB     *pgxpool.Pool
	Client *command.Client
	// MaxChainSessions is how many sessions a chain may hold; the handoff
	// that would exceed it fails its session instead. Default
	// domain.DefaultMaxChainSessions.
	MaxChainSessions int
}

// Run consumes the triggering events until ctx ends.
func (h Handoff) Run(ctx context.Context) error {
	return bus.Run(ctx, h.JS, bus.RunnerConfig{
		Stream: bus.StreamEvents, Consumer: HandoffConsumer, Handler: h.Handle,
		Concurrency: 4, OrderKey: bus.BySubject, FilterSubjects: handoffTriggers,
	})
}

// Handle reacts to one event.
func (h Handoff) Handle(ctx context.Context, m jetstream.Msg) error {
	env, id, err := decodeEvent(m)
	if err != nil {
		return err
	}
	switch env.Type {
	case domain.ContextExhaustedEvent{}.EventType(), domain.SessionVoluntaryHandoffEvent{}.EventType():
		return h.ensureChain(ctx, env, id)
	case domain.SessionHandoffInitiatedEvent{}.EventType():
		var e domain.SessionHandoffInitiatedEvent
		if err := json.Unmarshal(env.Data, &e); err != nil {
			return bus.Permanent(err)
		}
		return h.continueChain(ctx, env, id, e.HandoffDocumentID)
	case domain.SessionChainCancelledEvent{}.EventType():
		return h.cancelSessions(ctx, env, id)
	}
	return nil
}

// ensureChain creates the chain of a session that stopped for a handoff,
// unless it has one. The handoff document may create it first: both use
// command.ChainIDFor, so they agree.
func (h Handoff) ensureChain(ctx context.Context, env bus.Envelope, sessionID uuid.UUID) error {
	s, err := postgres.Sessions{}.Get(ctx, h.DB, sessionID)
	if err != nil {
		return notFoundIsFinal(err)
	}
	if s.ChainID() != nil {
		return nil
	}
	_, err = h.do(ctx, env.ID, domain.AggregateChain, command.CreateChain, command.ChainIDFor(sessionID), "",
		command.CreateChainData{FirstSessionID: sessionID, OriginalObjective: s.Objective()})
	return err
}

// continueChain starts the session that picks up a handoff and attaches
// it to the chain. The new session's id is derived from the handoff
// document, so whichever delivery gets here starts the same session.
func (h Handoff) continueChain(ctx context.Context, env bus.Envelope, chainID, docID uuid.UUID) error {
	c, err := postgres.Chains{}.Get(ctx, h.DB, chainID)
	if err != nil {
		return notFoundIsFinal(err)
	}
	doc, ok := pendingHandoff(c, docID)
	if !ok || c.Status() != domain.ChainActive {
		return nil // continued already, or the chain was closed meanwhile
	}
	from, err := postgres.Sessions{}.Get(ctx, h.DB, doc.FromSessionID)
	if err != nil {
		return notFoundIsFinal(err)
	}
	if err := c.EnsureRoomForSession(h.MaxChainSessions); err != nil {
		reason := fmt.Sprintf("The work was not continued: its chain already holds %d sessions, the most a chain may hold.", len(c.Sessions()))
		_, err := h.do(ctx, env.ID, domain.AggregateSession, command.FailHandoff, from.ID(), "", command.ReasonData{Reason: reason})
		return err
	}
	next := uuid.NewSHA1(commandNamespace, []byte("continuation/"+doc.ID.String()))
	r, err := h.do(ctx, env.ID, domain.AggregateSession, command.StartSession, next, from.OwnerID().String(),
		continuation(c, doc, from))
	if err != nil || r.Err() != nil {
		return err
	}
	_, err = h.do(ctx, env.ID, domain.AggregateChain, command.AttachSession, chainID, "", command.AttachSessionData{SessionID: next})
	return err
}

func pendingHandoff(c *domain.SessionChain, docID uuid.UUID) (domain.HandoffDocument, bool) {
	doc, ok := c.PendingHandoff()
	return doc, ok && doc.ID == docID
}

// continuation is the start of the session that continues from's work:
// the same configuration, a fresh budget of the same size, and the
// handoff as its objective.
func continuation(c *domain.SessionChain, doc domain.HandoffDocument, from *domain.AgentSession) command.StartSessionData {
	chainID := c.ID()
	policy := from.ToolApproval()
	auto := from.AutoContinue()
	if auto != nil {
		auto.CurrentContinuationCount = 0
	}
	part := len(c.Sessions()) + 1
	return command.StartSessionData{
		WorkingDirectory: from.WorkingDirectory(),
		Objective:        handoffObjective(c.OriginalObjective(), doc, part),
		TemplateID:       from.TemplateID(),
		SkillIDs:         from.EnabledSkillIDs(),
		ModelID:          from.ModelID(),
		Name:             cut(fmt.Sprintf("%s (part %d)", baseName(from.Name()), part), domain.MaxSessionNameChars),
		BudgetCapUsd:     from.Budget().HardCapUsd,
		WarnAtPercent:    from.Budget().WarnAtPercent,
		AutoContinue:     auto,
		ChainID:          &chainID,
		ToolApproval:     &policy,
	}
}

// handoffObjective writes the handoff as the next session's objective:
// what is left first, since an objective holds at most
// domain.MaxObjectiveChars and is cut at the end. The whole document
// stays in the chain.
func handoffObjective(original string, doc domain.HandoffDocument, part int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Continue this work (part %d): a previous session ran out of context and handed it off.\n\n", part)
	fmt.Fprintf(&b, "Remaining work:\n%s\n\n", doc.RemainingWork)
	if doc.KeyDecisions != "" {
		fmt.Fprintf(&b, "Key decisions:\n%s\n\n", doc.KeyDecisions)
	}
	fmt.Fprintf(&b, "Done so far:\n%s\n\n", doc.Summary)
	fmt.Fprintf(&b, "Original objective:\n%s", original)
	return cut(b.String(), domain.MaxObjectiveChars)
}

// baseName drops the " (part N)" an earlier continuation added.
func baseName(name string) string {
	if i := strings.LastIndex(name, " (part "); i > 0 && strings.HasSuffix(name, ")") {
		return name[:i]
	}
	return name
}

// cut shortens s to at most n characters, marking the cut.
func cut(s string, n int) string {
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:n-1])) + "…"
}

// cancelSessions cancels the sessions of a cancelled chain that are
// still live. A session that ended meanwhile refuses, harmlessly.
func (h Handoff) cancelSessions(ctx context.Context, env bus.Envelope, chainID uuid.UUID) error {
	c, err := postgres.Chains{}.Get(ctx, h.DB, chainID)
	if err != nil {
		return notFoundIsFinal(err)
	}
	for _, cs := range c.Sessions() {
		s, err := postgres.Sessions{}.Get(ctx, h.DB, cs.SessionID)
		if err != nil {
			return notFoundIsFinal(err)
		}
		if s.Status().IsTerminal() || s.Status() == domain.StatusCancelling {
			continue
		}
		if _, err := h.do(ctx, env.ID, domain.AggregateSession, command.CancelSession, s.ID(), "", nil); err != nil {
			return err
		}
	}
	return nil
}

// do sends a handoff command, derived from its cause.
func (h Handoff) do(ctx context.Context, cause, aggregate, name string, id uuid.UUID, owner string, data any) (command.Result, error) {
	return doDerived(ctx, h.Client, "handoff", cause+"/"+name+"/"+id.String(), aggregate, name, id, owner, data)
}

// notFoundIsFinal dead-letters an event about an aggregate that does not
// exist instead of retrying it.
func notFoundIsFinal(err error) error {
	if errors.Is(err, postgres.ErrNotFound) {
		return bus.Permanent(err)
	}
	return err
}
