package queries

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/domain"
)

// Session returns the state of the owner's session id
// (GetAgentSessionQuery), without its API key hash. Another owner's
// session is a *NotFoundError.
func (s *Store) Session(ctx context.Context, owner, id uuid.UUID) (domain.AgentSessionSnapshot, error) {
	var (
		raw     []byte
		version int64
	)
	err := s.db.QueryRow(ctx, "SELECT doc, version FROM sessions WHERE id = $1 AND owner_id = $2", id, owner).
		Scan(&raw, &version)
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.AgentSessionSnapshot{}, &NotFoundError{Entity: "session", ID: id.String()}
	}
	if err != nil {
		return domain.AgentSessionSnapshot{}, fmt.Errorf("queries: session %s: %w", id, err)
	}
	snap, err := decodeSession(raw)
	if err != nil {
		return domain.AgentSessionSnapshot{}, err
	}
	snap.Version = version
	return snap, nil
}

func decodeSession(raw []byte) (domain.AgentSessionSnapshot, error) {
	var snap domain.AgentSessionSnapshot
	if err := json.Unmarshal(raw, &snap); err != nil {
		return snap, fmt.Errorf("queries: stored session unreadable: %w", err)
	}
	// The hash identifies the agent's key: it never leaves the store.
	snap.APIKeyHash = ""
	return snap, nil
}

// SessionSummary is one row of a session list (AgentSessionSummaryDto).
type SessionSummary struct {
	ID                        uuid.UUID
	Name                      string
	Status                    domain.SessionStatus
	HasPendingReview          bool
	TotalCostUsd              domain.USD
	ContextWindowUsagePercent float64
	TurnCount                 int
	// Elapsed is the time since the session started, up to its end; 0
	// before it starts.
	Elapsed           time.Duration
	EnabledSkillCount int
	ChainID           *uuid.UUID
	TemplateID        *uuid.UUID
	CreatedAt         time.Time
	StartedAt         *time.Time
	CompletedAt       *time.Time
}

// ListSessionsParams selects the sessions of ListSessions.
type ListSessionsParams struct {
	// Owner is whose sessions to list.
	Owner uuid.UUID
	// Status, when set, keeps only the sessions in that status.
	Status domain.SessionStatus
	// TemplateID, when set, keeps only the sessions configured from that
	// template.
	TemplateID *uuid.UUID
	Paging
}

// ListSessions returns one page of the owner's sessions, newest first
// (ListAgentSessionsQuery).
func (s *Store) ListSessions(ctx context.Context, p ListSessionsParams) (Page[SessionSummary], error) {
	where, args := "owner_id = $1", []any{p.Owner}
	if p.Status != "" {
		if !p.Status.IsValid() {
			return Page[SessionSummary]{}, &domain.ValidationError{FieldName: "status", Message: fmt.Sprintf("unknown session status %q", p.Status)}
		}
		args = append(args, string(p.Status))
		where += fmt.Sprintf(" AND status = $%d", len(args))
	}
	if p.TemplateID != nil {
		args = append(args, *p.TemplateID)
		where += fmt.Sprintf(" AND template_id = $%d", len(args))
	}
	now := s.now()
	return listPage(ctx, s.db, where, args, p.Paging, func(snap domain.AgentSessionSnapshot) SessionSummary {
		return summarize(snap, now)
	})
}

func summarize(snap domain.AgentSessionSnapshot, now time.Time) SessionSummary {
	return SessionSummary{
		ID: snap.ID, Name: snap.Name, Status: snap.Status, HasPendingReview: snap.HasPendingReview,
		TotalCostUsd: snap.Metrics.TotalCostUsd, ContextWindowUsagePercent: snap.Metrics.ContextWindowUsagePercent(),
		TurnCount: snap.Metrics.TurnCount, Elapsed: elapsed(snap, now), EnabledSkillCount: len(snap.EnabledSkillIDs),
		ChainID: snap.ChainID, TemplateID: snap.TemplateID, CreatedAt: snap.CreatedAt, StartedAt: snap.StartedAt, CompletedAt: snap.CompletedAt,
	}
}

// elapsed is how long the session ran: from its start to its end, or to
// now while it has not ended.
func elapsed(snap domain.AgentSessionSnapshot, now time.Time) time.Duration {
	if snap.StartedAt == nil {
		return 0
	}
	end := now
	if snap.CompletedAt != nil {
		end = *snap.CompletedAt
	} else if snap.Status.IsTerminal() {
		end = snap.UpdatedAt
	}
	if d := end.Sub(*snap.StartedAt); d > 0 {
		return d
	}
	return 0
}

// listPage counts the sessions matching where and returns one page of
// them, newest first, each turned into a T by row.
func listPage[T any](ctx context.Context, db DB, where string, args []any, paging Paging, row func(domain.AgentSessionSnapshot) T) (Page[T], error) {
	paging = paging.normalize()
	page := Page[T]{Items: []T{}, Page: paging.Page, PageSize: paging.PageSize}
	if err := db.QueryRow(ctx, "SELECT count(*) FROM sessions WHERE "+where, args...).Scan(&page.Total); err != nil {
		return page, fmt.Errorf("queries: count sessions: %w", err)
	}
	if page.Total <= paging.offset() {
		return page, nil
	}
	n := len(args)
	sql := fmt.Sprintf("SELECT doc, version FROM sessions WHERE %s ORDER BY created_at DESC, id DESC LIMIT $%d OFFSET $%d",
		where, n+1, n+2)
	rows, err := db.Query(ctx, sql, append(args, paging.PageSize, paging.offset())...)
	if err != nil {
		return page, fmt.Errorf("queries: list sessions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			raw     []byte
			version int64
		)
		if err := rows.Scan(&raw, &version); err != nil {
			return page, fmt.Errorf("queries: list sessions: %w", err)
		}
		snap, err := decodeSession(raw)
		if err != nil {
			return page, err
		}
		snap.Version = version
		page.Items = append(page.Items, row(snap))
	}
	if err := rows.Err(); err != nil {
		return page, fmt.Errorf("queries: list sessions: %w", err)
	}
	return page, nil
}
