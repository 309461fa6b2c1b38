package commands

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/internal/tracing"
	"github.com/agentbus/agentbus/postgres"
)

// DefaultModelID is the model of a session that names none and has no
// template to take one from.
const DefaultModelID = "claude-sonnet-4-5"

// startSession creates a Queued session with its API key. With a
// template, the session takes the template's defaults (model, budget,
// default skills first) and its composed configuration; the template and
// every skill must be the owner's and active. With a chain, the chain must
// be the owner's and active. The plaintext key goes to the caller once and
// is never stored: a repeat of the command gets the session without it.
func startSession(now Clock) Handler {
	return func(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
		in, err := decode[command.StartSessionData](cmd)
		if err != nil {
			return nil, err
		}
		owner, err := parseOwner(cmd)
		if err != nil {
			return nil, err
		}
		p := domain.NewSessionParams{
			ID: cmd.AggregateID, OwnerID: owner, ChainID: in.ChainID,
			Name: in.Name, WorkingDirectory: in.WorkingDirectory, Objective: in.Objective,
			ModelID: in.ModelID, EnabledSkillIDs: in.SkillIDs,
			AutoContinue: in.AutoContinue, ToolApproval: in.ToolApproval, ForkedFrom: in.ForkedFrom, Now: now().UTC(),
			// The trace of the command: the request's that started the
			// session, or the schedule's or the handoff's.
			TraceID: tracing.TraceID(ctx),
		}
		template, err := sessionLinks(ctx, tx, in, owner)
		if err != nil {
			return nil, err
		}
		// Without a cap of its own, a session from a template takes the
		// template's default budget.
		if in.BudgetCapUsd != 0 || template == nil {
			if p.Budget, err = domain.NewSessionBudget(in.BudgetCapUsd, in.WarnAtPercent); err != nil {
				return nil, err
			}
		}
		wanted := in.SkillIDs
		if template != nil {
			wanted = append(template.DefaultSkillIDs(), in.SkillIDs...)
		}
		enabled, err := ownedSkills(ctx, tx, wanted, owner)
		if err != nil {
			return nil, err
		}
		return addSession(ctx, tx, in, p, template, enabled)
	}
}

// sessionLinks checks what a new session is tied to: the session it forks
// from, its chain and its template, all the owner's; it returns the
// template, if any.
func sessionLinks(ctx context.Context, tx pgx.Tx, in command.StartSessionData, owner uuid.UUID) (*domain.AgentTemplate, error) {
	if f := in.ForkedFrom; f != nil {
		// A fork reaches only its own owner's sessions.
		parent, err := sessions.Get(ctx, tx, f.SessionID)
		if errors.Is(err, postgres.ErrNotFound) || (err == nil && parent.OwnerID() != owner) {
			return nil, &domain.NotFoundError{Entity: "AgentSession", ID: f.SessionID.String()}
		}
		if err != nil {
			return nil, err
		}
	}
	if in.ChainID != nil {
		if err := requireLiveChain(ctx, tx, *in.ChainID, owner); err != nil {
			return nil, err
		}
	}
	if in.TemplateID == nil {
		return nil, nil
	}
	return ownedTemplate(ctx, tx, *in.TemplateID, owner)
}

// addSession creates the session, its API key and, for a consolidation,
// its record, and returns the state with the key shown once.
func addSession(ctx context.Context, tx pgx.Tx, in command.StartSessionData, p domain.NewSessionParams,
	template *domain.AgentTemplate, enabled []*domain.AgentSkill) (any, error) {
	s, err := newSession(p, template, enabled)
	if err != nil {
		return nil, err
	}
	// Composing now refuses a configuration the sidecar could not run.
	if _, err := s.ComposeConfig(template, enabled); err != nil {
		return nil, err
	}
	key, err := s.GenerateAPIKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	if err := created(sessions.Add(ctx, tx, s), "AgentSession", s.ID()); err != nil {
		return nil, err
	}
	if in.Consolidates != nil {
		if err := addConsolidation(ctx, tx, s.ID(), *in.Consolidates, enabled); err != nil {
			return nil, err
		}
	}
	return WithSecret{
		State:  command.StartSessionResult{Session: SessionState(s)},
		Secret: command.StartSessionResult{Session: SessionState(s), APIKey: key},
	}, nil
}

// newSession creates the session from its template, or ad hoc; either way
// a deactivated skill is refused.
func newSession(p domain.NewSessionParams, template *domain.AgentTemplate, skills []*domain.AgentSkill) (*domain.AgentSession, error) {
	if template != nil {
		return domain.NewSessionFromTemplate(p, template, skills)
	}
	for _, sk := range skills {
		if !sk.IsActive() {
			return nil, &domain.TransitionError{Aggregate: "AgentSkill", Operation: "EnableSkill", Status: "Inactive", Reason: domain.ErrSkillInactive}
		}
	}
	if p.ModelID == "" {
		p.ModelID = DefaultModelID
	}
	return domain.NewAgentSession(p)
}

// ownedTemplate loads a template of owner; a missing template and
// another owner's are both not found.
func ownedTemplate(ctx context.Context, q postgres.Querier, id, owner uuid.UUID) (*domain.AgentTemplate, error) {
	t, err := templates.Get(ctx, q, id)
	if errors.Is(err, postgres.ErrNotFound) || (err == nil && t.OwnerID() != owner) {
		return nil, &domain.NotFoundError{Entity: "AgentTemplate", ID: id.String()}
	}
	return t, err
}

// requireLiveChain checks that a new session may join chain id: the
// owner's, and Active.
func requireLiveChain(ctx context.Context, q postgres.Querier, id, owner uuid.UUID) error {
	c, err := chains.Get(ctx, q, id)
	if errors.Is(err, postgres.ErrNotFound) || (err == nil && c.OwnerID() != owner) {
		return &domain.NotFoundError{Entity: "SessionChain", ID: id.String()}
	}
	if err != nil {
		return err
	}
	if c.Status() != domain.ChainActive {
		return &domain.TransitionError{Aggregate: "SessionChain", Operation: "AttachSession", Status: string(c.Status()), Reason: domain.ErrInvalidTransition}
	}
	return nil
}

// addConsolidation records what a consolidation session folds in: Active
// memory pills of a skill the session has enabled.
func addConsolidation(ctx context.Context, tx pgx.Tx, session uuid.UUID, c command.SkillConsolidation, enabled []*domain.AgentSkill) error {
	i := slices.IndexFunc(enabled, func(sk *domain.AgentSkill) bool { return sk.ID() == c.SkillID })
	if i < 0 {
		return badData{fmt.Errorf("consolidates skill %s, which the session does not enable", c.SkillID)}
	}
	if len(c.PillIDs) == 0 {
		return badData{errors.New("a consolidation names at least one memory pill")}
	}
	pills := enabled[i].MemoryPills()
	for _, id := range c.PillIDs {
		if !slices.ContainsFunc(pills, func(p domain.MemoryPill) bool { return p.ID == id && p.Status == domain.PillActive }) {
			return badData{fmt.Errorf("memory pill %s is not an Active pill of skill %s", id, c.SkillID)}
		}
	}
	return postgres.AddConsolidation(ctx, tx, postgres.Consolidation{SessionID: session, SkillID: c.SkillID, PillIDs: c.PillIDs})
}
