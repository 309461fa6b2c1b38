package queries

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/domain"
)

// chainCostSQL is the total cost of chain c's sessions, as text (exact:
// the stored amounts are JSON numbers and summed as numeric). The chain's
// own list of sessions says which count.
const chainCostSQL = `COALESCE((
	SELECT sum((s.doc->'metrics'->>'totalCostUsd')::numeric)
	  FROM sessions s
	 WHERE s.id IN (SELECT (m->>'sessionId')::uuid FROM jsonb_array_elements(c.doc->'sessions') m)
), 0)::text`

// ChainSummary is one row of a chain list (SessionChainSummaryDto).
type ChainSummary struct {
	ID                uuid.UUID
	OriginalObjective string
	Status            domain.ChainStatus
	SessionCount      int
	CurrentSessionID  uuid.UUID
	// TotalCostUsd sums the cost of every session of the chain.
	TotalCostUsd domain.USD
	CreatedAt    time.Time
	CompletedAt  *time.Time
}

// ListChainsParams selects the chains of ListChains.
type ListChainsParams struct {
	// Owner is whose chains to list.
	Owner uuid.UUID
	// Status, when set, keeps only the chains in that status.
	Status domain.ChainStatus
	Paging
}

// ListChains returns one page of the owner's chains, newest first, each
// with the total cost of its sessions (ListSessionChainsQuery).
func (s *Store) ListChains(ctx context.Context, p ListChainsParams) (Page[ChainSummary], error) {
	where, args := "c.owner_id = $1", []any{p.Owner}
	if p.Status != "" {
		if p.Status != domain.ChainActive && p.Status != domain.ChainCompleted && p.Status != domain.ChainCancelled {
			return Page[ChainSummary]{}, &domain.ValidationError{FieldName: "status", Message: fmt.Sprintf("unknown chain status %q", p.Status)}
		}
		where += " AND c.status = $2"
		args = append(args, string(p.Status))
	}
	paging := p.Paging.normalize()
	page := Page[ChainSummary]{Items: []ChainSummary{}, Page: paging.Page, PageSize: paging.PageSize}
	if err := s.db.QueryRow(ctx, "SELECT count(*) FROM chains c WHERE "+where, args...).Scan(&page.Total); err != nil {
		return page, fmt.Errorf("queries: count chains: %w", err)
	}
	if page.Total <= paging.offset() {
		return page, nil
	}
	n := len(args)
	rows, err := s.db.Query(ctx, fmt.Sprintf(`SELECT c.doc, c.version, %s FROM chains c WHERE %s
		ORDER BY c.created_at DESC, c.id DESC LIMIT $%d OFFSET $%d`, chainCostSQL, where, n+1, n+2),
		append(args, paging.PageSize, paging.offset())...)
	if err != nil {
		return page, fmt.Errorf("queries: list chains: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			raw     []byte
			version int64
			cost    string
			snap    domain.SessionChainSnapshot
		)
		if err := rows.Scan(&raw, &version, &cost); err != nil {
			return page, fmt.Errorf("queries: list chains: %w", err)
		}
		if err := json.Unmarshal(raw, &snap); err != nil {
			return page, fmt.Errorf("queries: stored chain unreadable: %w", err)
		}
		total, err := domain.ParseUSD(cost)
		if err != nil {
			return page, fmt.Errorf("queries: chain %s cost: %w", snap.ID, err)
		}
		page.Items = append(page.Items, ChainSummary{ID: snap.ID, OriginalObjective: snap.OriginalObjective,
			Status: snap.Status, SessionCount: len(snap.Sessions), CurrentSessionID: currentOf(snap),
			TotalCostUsd: total, CreatedAt: snap.CreatedAt, CompletedAt: snap.CompletedAt})
	}
	if err := rows.Err(); err != nil {
		return page, fmt.Errorf("queries: list chains: %w", err)
	}
	return page, nil
}

func currentOf(snap domain.SessionChainSnapshot) uuid.UUID {
	if len(snap.Sessions) == 0 {
		return uuid.Nil
	}
	return snap.Sessions[len(snap.Sessions)-1].SessionID
}

// ChainSession is one session of a chain's detail, in chain order.
type ChainSession struct {
	SessionID    uuid.UUID
	Position     int
	JoinedAt     time.Time
	Name         string
	Status       domain.SessionStatus
	TotalCostUsd domain.USD
}

// ChainView is a chain's detail (SessionChainDto): its sessions in order
// with their status and cost, its handoff documents, and the total cost.
type ChainView struct {
	ID                uuid.UUID
	OriginalObjective string
	Status            domain.ChainStatus
	CurrentSessionID  uuid.UUID
	Sessions          []ChainSession
	HandoffDocuments  []domain.HandoffDocument
	TotalCostUsd      domain.USD
	CreatedAt         time.Time
	CompletedAt       *time.Time
	Version           int64
}

// Chain returns the owner's chain id with its sessions and handoff
// documents (GetSessionChainQuery). Another owner's chain is a
// *NotFoundError.
func (s *Store) Chain(ctx context.Context, owner, id uuid.UUID) (ChainView, error) {
	snap, version, err := ownedDoc[domain.SessionChainSnapshot](ctx, s.db, "chains", "chain", owner, id)
	if err != nil {
		return ChainView{}, err
	}
	v := ChainView{ID: snap.ID, OriginalObjective: snap.OriginalObjective, Status: snap.Status,
		CurrentSessionID: currentOf(snap), Sessions: make([]ChainSession, 0, len(snap.Sessions)),
		HandoffDocuments: snap.HandoffDocuments, CreatedAt: snap.CreatedAt, CompletedAt: snap.CompletedAt, Version: version}
	if v.HandoffDocuments == nil {
		v.HandoffDocuments = []domain.HandoffDocument{}
	}
	ids := make([]uuid.UUID, len(snap.Sessions))
	for i, cs := range snap.Sessions {
		ids[i] = cs.SessionID
	}
	rows, err := s.db.Query(ctx, `SELECT id, doc->>'name', status, COALESCE(doc->'metrics'->>'totalCostUsd', '0')
		FROM sessions WHERE id = ANY($1) AND owner_id = $2`, ids, owner)
	if err != nil {
		return ChainView{}, fmt.Errorf("queries: sessions of chain %s: %w", id, err)
	}
	defer rows.Close()
	found := map[uuid.UUID]ChainSession{}
	for rows.Next() {
		var (
			cs           ChainSession
			status, cost string
		)
		if err := rows.Scan(&cs.SessionID, &cs.Name, &status, &cost); err != nil {
			return ChainView{}, fmt.Errorf("queries: sessions of chain %s: %w", id, err)
		}
		cs.Status = domain.SessionStatus(status)
		if cs.TotalCostUsd, err = domain.ParseUSD(cost); err != nil {
			return ChainView{}, fmt.Errorf("queries: session %s cost: %w", cs.SessionID, err)
		}
		found[cs.SessionID] = cs
	}
	if err := rows.Err(); err != nil {
		return ChainView{}, fmt.Errorf("queries: sessions of chain %s: %w", id, err)
	}
	for _, member := range snap.Sessions {
		cs := found[member.SessionID]
		cs.SessionID, cs.Position, cs.JoinedAt = member.SessionID, member.Position, member.JoinedAt
		v.TotalCostUsd += cs.TotalCostUsd
		v.Sessions = append(v.Sessions, cs)
	}
	return v, nil
}
