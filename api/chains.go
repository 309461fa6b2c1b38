package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres/queries"
)

// ChainSummary is one chain of a list (SessionChainSummaryDto).
type ChainSummary struct {
	ID                uuid.UUID  `json:"id" format:"uuid" doc:"The chain's id." example:"7d8e9f0a-1b2c-4d3e-8f4a-5b6c7d8e9f0a"`
	OriginalObjective string     `json:"originalObjective" doc:"The objective of the chain's first session." example:"Migrate the billing service to the new payments API."`
	Status            string     `json:"status" enum:"Active,Completed,Cancelled" doc:"Active while work goes on; Completed or Cancelled for good." example:"Active"`
	SessionCount      int        `json:"sessionCount" doc:"How many sessions the chain holds." example:"2"`
	CurrentSessionID  uuid.UUID  `json:"currentSessionId" format:"uuid" doc:"The chain's latest session." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	TotalCostUsd      float64    `json:"totalCostUsd" doc:"What the chain's sessions spent together, in US dollars." example:"7.4"`
	CreatedAt         time.Time  `json:"createdAt" doc:"When the chain was created." example:"2026-03-01T09:00:00Z"`
	CompletedAt       *time.Time `json:"completedAt,omitempty" doc:"When it was completed or cancelled." example:"2026-03-01T12:00:00Z"`
}

// ChainList is one page of chains.
type ChainList struct {
	Items    []ChainSummary `json:"items" nullable:"false" doc:"The page's chains, newest first."`
	Total    int            `json:"total" doc:"How many chains match, on all pages." example:"3"`
	Page     int            `json:"page" doc:"The page served, from 1." example:"1"`
	PageSize int            `json:"pageSize" doc:"The page size served." example:"20"`
}

// ChainDetail is a chain with its sessions and handoff documents
// (SessionChainDto).
type ChainDetail struct {
	ID                uuid.UUID         `json:"id" format:"uuid" doc:"The chain's id." example:"7d8e9f0a-1b2c-4d3e-8f4a-5b6c7d8e9f0a"`
	OriginalObjective string            `json:"originalObjective" doc:"The objective of the chain's first session." example:"Migrate the billing service to the new payments API."`
	Status            string            `json:"status" enum:"Active,Completed,Cancelled" doc:"Active while work goes on; Completed or Cancelled for good." example:"Active"`
	CurrentSessionID  uuid.UUID         `json:"currentSessionId" format:"uuid" doc:"The chain's latest session." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	Sessions          []ChainedSession  `json:"sessions" nullable:"false" doc:"The chain's sessions, in order."`
	HandoffDocuments  []HandoffDocument `json:"handoffDocuments" nullable:"false" doc:"What each session handed to the next, in order."`
	TotalCostUsd      float64           `json:"totalCostUsd" doc:"What the chain's sessions spent together, in US dollars." example:"7.4"`
	CreatedAt         time.Time         `json:"createdAt" doc:"When the chain was created." example:"2026-03-01T09:00:00Z"`
	CompletedAt       *time.Time        `json:"completedAt,omitempty" doc:"When it was completed or cancelled." example:"2026-03-01T12:00:00Z"`
	Version           int64             `json:"version" doc:"The chain's version; it grows with every change." example:"3"`
}

// ChainedSession is one session of a chain.
type ChainedSession struct {
	SessionID    uuid.UUID `json:"sessionId" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	Position     int       `json:"position" doc:"Its place in the chain, from 1." example:"1"`
	JoinedAt     time.Time `json:"joinedAt" doc:"When it joined the chain." example:"2026-03-01T09:00:00Z"`
	Name         string    `json:"name" doc:"The session's name." example:"Migrate billing"`
	Status       string    `json:"status" enum:"Queued,Running,Interrupting,Interrupted,Pausing,Paused,Resuming,Cancelling,Cancelled,WaitingForInput,WaitingForApproval,Idle,ContextExhausted,Completed,Failed" doc:"The session's status." example:"ContextExhausted"`
	TotalCostUsd float64   `json:"totalCostUsd" doc:"What the session spent, in US dollars." example:"3.7"`
}

// HandoffDocument is what a session whose context ran out handed on.
type HandoffDocument struct {
	ID            uuid.UUID  `json:"id" format:"uuid" doc:"The document's id." example:"4b5c6d7e-8f9a-4b0c-9d1e-2f3a4b5c6d7e"`
	FromSessionID uuid.UUID  `json:"fromSessionId" format:"uuid" doc:"The session that handed off." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	ToSessionID   *uuid.UUID `json:"toSessionId,omitempty" format:"uuid" doc:"The session that picked the work up; absent while it is being started." example:"1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f"`
	Summary       string     `json:"summary" doc:"What was accomplished." example:"Moved invoices and refunds to the new API."`
	RemainingWork string     `json:"remainingWork" doc:"What still needs to be done." example:"Subscriptions and the webhook handler."`
	KeyDecisions  string     `json:"keyDecisions,omitempty" doc:"Context to carry forward." example:"Amounts stay in cents."`
	CreatedAt     time.Time  `json:"createdAt" doc:"When it was written." example:"2026-03-01T10:30:00Z"`
}

type listChainsInput struct {
	Status   string `query:"status" enum:"Active,Completed,Cancelled" doc:"Only the chains in this status." example:"Active"`
	Page     int    `query:"page" minimum:"1" default:"1" doc:"The page, from 1." example:"1"`
	PageSize int    `query:"pageSize" minimum:"1" maximum:"100" default:"20" doc:"Chains per page." example:"20"`
}

type chainIDInput struct {
	ID string `path:"id" format:"uuid" doc:"The chain's id." example:"7d8e9f0a-1b2c-4d3e-8f4a-5b6c7d8e9f0a"`
}

type chainListOutput struct{ Body ChainList }
type chainOutput struct{ Body ChainDetail }

// addChainRoutes registers reading, completing and cancelling chains.
func (s *Server) addChainRoutes(api huma.API) {
	register(api, humanOp("list-chains", http.MethodGet, "/api/agents/chains", "List your session chains",
		"Your chains, newest first, optionally only those in one status, each with the total cost of its sessions.", "Chains", listErrors), s.listChains)
	register(api, humanOp("get-chain", http.MethodGet, "/api/agents/chains/{id}", "Get a session chain",
		"One of your chains: its sessions in order with their status and cost, and the handoff documents between them.", "Chains", queryErrors), s.getChain)
	register(api, humanOp("complete-chain", http.MethodPost, "/api/agents/chains/{id}/complete", "Complete a chain",
		"Closes an Active chain (-> Completed) once its current session is Idle or Completed.", "Chains", commandErrors),
		func(ctx context.Context, in *chainIDInput) (*chainOutput, error) {
			return s.chainCommand(ctx, in.ID, command.CompleteChain)
		})
	register(api, humanOp("cancel-chain", http.MethodPost, "/api/agents/chains/{id}/cancel", "Cancel a chain",
		"Cancels an Active chain (-> Cancelled); its sessions that are not over yet are then cancelled.", "Chains", commandErrors),
		func(ctx context.Context, in *chainIDInput) (*chainOutput, error) {
			return s.chainCommand(ctx, in.ID, command.CancelChain)
		})
}

func (s *Server) listChains(ctx context.Context, in *listChainsInput) (*chainListOutput, error) {
	owner, err := s.reader(ctx)
	if err != nil {
		return nil, err
	}
	page, err := s.deps.Queries.ListChains(ctx, queries.ListChainsParams{Owner: owner,
		Status: domain.ChainStatus(in.Status), Paging: queries.Paging{Page: in.Page, PageSize: in.PageSize}})
	if err != nil {
		return nil, err
	}
	out := &chainListOutput{Body: ChainList{Items: make([]ChainSummary, 0, len(page.Items)),
		Total: page.Total, Page: page.Page, PageSize: page.PageSize}}
	for _, c := range page.Items {
		out.Body.Items = append(out.Body.Items, ChainSummary{ID: c.ID, OriginalObjective: c.OriginalObjective,
			Status: string(c.Status), SessionCount: c.SessionCount, CurrentSessionID: c.CurrentSessionID,
			TotalCostUsd: usd(c.TotalCostUsd), CreatedAt: c.CreatedAt, CompletedAt: c.CompletedAt})
	}
	return out, nil
}

func (s *Server) getChain(ctx context.Context, in *chainIDInput) (*chainOutput, error) {
	owner, id, err := s.readOwned(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	v, err := s.deps.Queries.Chain(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return &chainOutput{Body: chainDetailOf(v)}, nil
}

// chainCommand sends a chain command and answers the chain's detail as
// the command left it.
func (s *Server) chainCommand(ctx context.Context, rawID, name string) (*chainOutput, error) {
	id, err := parseID("path.id", rawID)
	if err != nil {
		return nil, err
	}
	if s.deps.Queries == nil {
		return nil, unavailable("queries")
	}
	if _, err := s.send(ctx, domain.AggregateChain, name, id, nil, nil); err != nil {
		return nil, err
	}
	// The command's state lacks the sessions' names and costs the detail
	// shows; it is committed by now, so the read model has it.
	return s.getChain(ctx, &chainIDInput{ID: rawID})
}

func chainDetailOf(v queries.ChainView) ChainDetail {
	d := ChainDetail{ID: v.ID, OriginalObjective: v.OriginalObjective, Status: string(v.Status),
		CurrentSessionID: v.CurrentSessionID, Sessions: make([]ChainedSession, 0, len(v.Sessions)),
		HandoffDocuments: make([]HandoffDocument, 0, len(v.HandoffDocuments)), TotalCostUsd: usd(v.TotalCostUsd),
		CreatedAt: v.CreatedAt, CompletedAt: v.CompletedAt, Version: v.Version}
	for _, cs := range v.Sessions {
		d.Sessions = append(d.Sessions, ChainedSession{SessionID: cs.SessionID, Position: cs.Position, JoinedAt: cs.JoinedAt,
			Name: cs.Name, Status: string(cs.Status), TotalCostUsd: usd(cs.TotalCostUsd)})
	}
	for _, h := range v.HandoffDocuments {
		doc := HandoffDocument{ID: h.ID, FromSessionID: h.FromSessionID, Summary: h.Summary,
			RemainingWork: h.RemainingWork, KeyDecisions: h.KeyDecisions, CreatedAt: h.CreatedAt}
		if !h.IsPending() {
			to := h.ToSessionID
			doc.ToSessionID = &to
		}
		d.HandoffDocuments = append(d.HandoffDocuments, doc)
	}
	return d
}
