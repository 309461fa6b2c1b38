package api

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres/queries"
	"github.com/agentbus/agentbus/sidecar/workspace"
)

// sessionNamespace derives a new session's id from the id of the command
// that starts it, so a repeated start names the same session.
var sessionNamespace = uuid.MustParse("9d3c1a7e-5b2f-4e8d-a6c4-1f0b2e3d4c5a")

// StartSessionRequest starts a standalone session (StartAgentSessionCommand).
type StartSessionRequest struct {
	WorkingDirectory string               `json:"workingDirectory,omitempty" maxLength:"4096" doc:"Where the agent works: a directory inside your part of the workspace (<workspace>/<your user id>/), given as a path relative to it or as an absolute path; symlinks are followed and must not lead out. By default a new directory named after the session." example:"shop"`
	Objective        string               `json:"objective" minLength:"1" maxLength:"2000" doc:"What the session must achieve." example:"Add retries with backoff to the HTTP client, with tests."`
	Name             string               `json:"name,omitempty" maxLength:"200" doc:"A name for the session; by default the objective's first line." example:"HTTP retries"`
	ModelID          string               `json:"modelId,omitempty" maxLength:"200" doc:"The model to run; by default the template's, or claude-sonnet-4-5 without a template." example:"claude-sonnet-4-5"`
	TemplateID       *uuid.UUID           `json:"templateId,omitempty" format:"uuid" doc:"One of your active templates to configure the session from: its model, budget, default skills and prompt." example:"3c9d2e1f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"`
	SkillIDs         []uuid.UUID          `json:"skillIds,omitempty" maxItems:"50" format:"uuid" doc:"Your active skills to enable on the session, after the template's defaults."`
	BudgetCapUsd     float64              `json:"budgetCapUsd,omitempty" exclusiveMinimum:"0" maximum:"1000000" doc:"The most the session may spend, in US dollars. Required without a template; with one, the template's budget by default." example:"10"`
	WarnAtPercent    int                  `json:"warnAtPercent,omitempty" minimum:"1" maximum:"99" doc:"The share of the cap at which you are warned; 80 by default." example:"80"`
	AutoContinue     *AutoContinueRequest `json:"autoContinue,omitempty" doc:"Let the session validate its work after each turn and continue on its own."`
	ChainID          *uuid.UUID           `json:"chainId,omitempty" format:"uuid" doc:"A chain the session continues." example:"7d8e9f0a-1b2c-4d3e-8f4a-5b6c7d8e9f0a"`
	ToolApproval     *ToolApprovalRequest `json:"toolApproval,omitempty" doc:"Which tool uses wait for your approval; none by default."`
}

// AutoContinueRequest configures the validate-and-continue loop.
type AutoContinueRequest struct {
	ValidationCriteria []ValidationCriterion `json:"validationCriteria" maxItems:"20" doc:"The checks run after each turn; a failing one makes the session continue."`
	MaxContinuations   int                   `json:"maxContinuations,omitempty" minimum:"1" maximum:"100" doc:"How many times the session may continue on its own; 5 by default." example:"5"`
	IsEnabled          bool                  `json:"isEnabled" doc:"Whether the loop is on." example:"true"`
}

// ToolApprovalRequest says which tool uses wait for the owner's approval.
type ToolApprovalRequest struct {
	Mode           string   `json:"mode" enum:"None,All,List" doc:"None: no tool waits; All: every tool use waits; List: the tools listed wait." example:"List"`
	Tools          []string `json:"tools,omitempty" maxItems:"100" doc:"With mode List: the tools that wait for approval." example:"[\"Bash\"]"`
	TimeoutSeconds int64    `json:"timeoutSeconds,omitempty" minimum:"1" maximum:"86400" doc:"How long a request waits for an answer; 120 by default." example:"120"`
	OnTimeout      string   `json:"onTimeout,omitempty" enum:"Deny,Allow,Fail" doc:"What an unanswered request becomes; Deny by default." example:"Deny"`
}

type startSessionInput struct {
	Body StartSessionRequest
}

// StartSessionResponse is a started session and its agent API key.
type StartSessionResponse struct {
	Session SessionDetail `json:"session" doc:"The new session, Queued until a pool slot is free."`
	APIKey  string        `json:"apiKey,omitempty" doc:"The session's agent API key, shown once: keep it for the agent (header X-Agent-Key). A repeat of the request with the same Idempotency-Key returns the session without it." example:"abk_Vd3hX0kq6l1m2n3o4p5q6r7s8t9u0v1w2x3y4z5A6B7"`
}

type startSessionOutput struct {
	Location string `header:"Location" doc:"The new session's URL." example:"/api/agents/sessions/0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	Body     StartSessionResponse
}

// startFields renames the domain's field names to the request's.
var startFields = map[string]string{
	"budget.hardCapUsd":    "budgetCapUsd",
	"budget.warnAtPercent": "warnAtPercent",
	"enabledSkillIds":      "skillIds",
	"toolApproval.timeout": "toolApproval.timeoutSeconds",
}

// SessionSummary is one session of a list (AgentSessionSummaryDto).
type SessionSummary struct {
	ID                        uuid.UUID  `json:"id" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	Name                      string     `json:"name" doc:"The session's name." example:"Add retries to the HTTP client"`
	Status                    string     `json:"status" enum:"Queued,Running,Interrupting,Interrupted,Pausing,Paused,Resuming,Cancelling,Cancelled,WaitingForInput,WaitingForApproval,Idle,ContextExhausted,Completed,Failed" doc:"Where the session is in its lifecycle." example:"Running"`
	HasPendingReview          bool       `json:"hasPendingReview" doc:"Whether output waits for your review." example:"false"`
	TotalCostUsd              float64    `json:"totalCostUsd" doc:"What the session spent, in US dollars." example:"2.35"`
	ContextWindowUsagePercent float64    `json:"contextWindowUsagePercent" doc:"How full its context window is, in percent." example:"41.2"`
	TurnCount                 int        `json:"turnCount" doc:"Turns that ended." example:"3"`
	ElapsedSeconds            int64      `json:"elapsedSeconds" doc:"How long the session has run (to its end, once ended); 0 before it starts." example:"754"`
	EnabledSkillCount         int        `json:"enabledSkillCount" doc:"How many skills are enabled." example:"2"`
	ChainID                   *uuid.UUID `json:"chainId,omitempty" format:"uuid" doc:"The chain the session belongs to, if any." example:"7d8e9f0a-1b2c-4d3e-8f4a-5b6c7d8e9f0a"`
	TemplateID                *uuid.UUID `json:"templateId,omitempty" format:"uuid" doc:"The template the session was configured from, if any." example:"3c9d2e1f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"`
	CreatedAt                 time.Time  `json:"createdAt" doc:"When the session was created." example:"2026-03-01T09:00:00Z"`
	StartedAt                 *time.Time `json:"startedAt,omitempty" doc:"When it started running." example:"2026-03-01T09:00:05Z"`
	CompletedAt               *time.Time `json:"completedAt,omitempty" doc:"When it ended." example:"2026-03-01T10:12:00Z"`
}

// SessionList is one page of sessions.
type SessionList struct {
	Items    []SessionSummary `json:"items" nullable:"false" doc:"The page's sessions, newest first."`
	Total    int              `json:"total" doc:"How many sessions match, on all pages." example:"42"`
	Page     int              `json:"page" doc:"The page served, from 1." example:"1"`
	PageSize int              `json:"pageSize" doc:"The page size served." example:"20"`
}

type listSessionsInput struct {
	Status     string `query:"status" enum:"Queued,Running,Interrupting,Interrupted,Pausing,Paused,Resuming,Cancelling,Cancelled,WaitingForInput,WaitingForApproval,Idle,ContextExhausted,Completed,Failed" doc:"Only the sessions in this status." example:"Running"`
	TemplateID string `query:"templateId" format:"uuid" doc:"Only the sessions configured from this template." example:"3c9d2e1f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"`
	Page       int    `query:"page" minimum:"1" default:"1" doc:"The page, from 1." example:"1"`
	PageSize   int    `query:"pageSize" minimum:"1" maximum:"100" default:"20" doc:"Sessions per page." example:"20"`
}

type sessionListOutput struct {
	Body SessionList
}

// HistoryItem is one session of the history (AgentSessionHistoryDto).
type HistoryItem struct {
	ID              uuid.UUID  `json:"id" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	Name            string     `json:"name" doc:"The session's name." example:"Add retries to the HTTP client"`
	Status          string     `json:"status" enum:"Queued,Running,Interrupting,Interrupted,Pausing,Paused,Resuming,Cancelling,Cancelled,WaitingForInput,WaitingForApproval,Idle,ContextExhausted,Completed,Failed" doc:"The session's status." example:"Completed"`
	TotalCostUsd    float64    `json:"totalCostUsd" doc:"What the session spent, in US dollars." example:"2.35"`
	DurationSeconds int64      `json:"durationSeconds" doc:"How long it ran, from its start to its end (or until now)." example:"4320"`
	Outcome         string     `json:"outcome" enum:"InProgress,Approved,Closed,Rejected,Failed,Cancelled,ContextExhausted" doc:"How it ended: its output Approved or Rejected, Closed without output, Failed, Cancelled, ContextExhausted (continued in its chain), or InProgress." example:"Approved"`
	FailureReason   string     `json:"failureReason,omitempty" enum:"BudgetExhausted,VerificationFailed,AgentError,ManualCancellation,Timeout,InfrastructureError" doc:"Why it failed, when it did." example:"AgentError"`
	CreatedAt       time.Time  `json:"createdAt" doc:"When it was created." example:"2026-03-01T09:00:00Z"`
	StartedAt       *time.Time `json:"startedAt,omitempty" doc:"When it started running." example:"2026-03-01T09:00:05Z"`
	CompletedAt     *time.Time `json:"completedAt,omitempty" doc:"When it ended." example:"2026-03-01T10:12:00Z"`
}

// SessionHistory is one page of the history.
type SessionHistory struct {
	Items    []HistoryItem `json:"items" nullable:"false" doc:"The page's sessions, newest first."`
	Total    int           `json:"total" doc:"How many sessions match, on all pages." example:"42"`
	Page     int           `json:"page" doc:"The page served, from 1." example:"1"`
	PageSize int           `json:"pageSize" doc:"The page size served." example:"20"`
}

type historyInput struct {
	From     time.Time `query:"from" doc:"Only the sessions created at or after this time." example:"2026-03-01T00:00:00Z"`
	To       time.Time `query:"to" doc:"Only the sessions created before this time." example:"2026-04-01T00:00:00Z"`
	Page     int       `query:"page" minimum:"1" default:"1" doc:"The page, from 1." example:"1"`
	PageSize int       `query:"pageSize" minimum:"1" maximum:"100" default:"20" doc:"Sessions per page." example:"20"`
}

type historyOutput struct {
	Body SessionHistory
}

type sessionIDInput struct {
	ID string `path:"id" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
}

type sessionOutput struct {
	Body SessionDetail
}

// SessionTaskList is the task list of a session.
type SessionTaskList struct {
	SessionID uuid.UUID `json:"sessionId" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	TaskList  *TaskList `json:"taskList" doc:"The agent's latest task list; null until it writes one."`
}

// SessionPlan is the plan of a session.
type SessionPlan struct {
	SessionID uuid.UUID `json:"sessionId" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	Plan      *Plan     `json:"plan" doc:"The agent's plan; null until it enters plan mode."`
}

type taskListOutput struct{ Body SessionTaskList }
type planOutput struct{ Body SessionPlan }
type metricsOutput struct{ Body SessionMetrics }

func humanOp(id, method, path, summary, description, tag string, errs []int) huma.Operation {
	return huma.Operation{OperationID: id, Method: method, Path: path, Summary: summary, Description: description,
		Tags: []string{tag}, Security: HumanAuth, Errors: errs}
}

// addSessionRoutes registers starting, listing and reading sessions.
func (s *Server) addSessionRoutes(api huma.API) {
	start := humanOp("start-session", http.MethodPost, "/api/agents/sessions", "Start a session",
		"Creates a standalone session, Queued until a slot of your session pool is free, and returns it with its agent API key. "+
			"The key is shown once: a repeat with the same Idempotency-Key returns the same session without it.",
		"Sessions", commandErrors)
	start.DefaultStatus = http.StatusCreated
	start.Metadata = map[string]any{metaReplayByCommand: true}
	register(api, start, s.startSession)

	register(api, humanOp("list-sessions", http.MethodGet, "/api/agents/sessions", "List your sessions",
		"Your sessions, newest first, optionally only those in one status.", "Sessions", listErrors), s.listSessions)
	register(api, humanOp("session-history", http.MethodGet, "/api/agents/sessions/history", "Session history",
		"Your sessions created in a date range, newest first, with their cost, duration and outcome.", "Sessions", listErrors), s.history)
	register(api, humanOp("get-session", http.MethodGet, "/api/agents/sessions/{id}", "Get a session",
		"The full state of one of your sessions: status, budget, metrics, output, plan, task list and what it waits on.", "Sessions", queryErrors), s.getSession)
	register(api, humanOp("get-session-task-list", http.MethodGet, "/api/agents/sessions/{id}/task-list", "Get a session's task list",
		"The agent's latest task list (its TodoWrite progress tracker), or null.", "Sessions", queryErrors), s.getTaskList)
	register(api, humanOp("get-session-plan", http.MethodGet, "/api/agents/sessions/{id}/plan", "Get a session's plan",
		"The agent's plan document, or null.", "Sessions", queryErrors), s.getPlan)
	register(api, humanOp("get-session-metrics", http.MethodGet, "/api/agents/sessions/{id}/metrics", "Get a session's metrics",
		"Cost, tokens per model, the context window and each subagent's own numbers.", "Sessions", queryErrors), s.getMetrics)
}

func (s *Server) startSession(ctx context.Context, in *startSessionInput) (*startSessionOutput, error) {
	b := in.Body
	budget, err := domain.USDFromFloat(b.BudgetCapUsd)
	if err != nil {
		return nil, NewKindError(KindValidation, "budgetCapUsd must be a finite amount").WithField("budgetCapUsd")
	}
	cmdID := CommandID(ctx)
	id := uuid.NewSHA1(sessionNamespace, cmdID[:])
	dir, err := s.workingDirectory(ctx, b.WorkingDirectory, id)
	if err != nil {
		return nil, err
	}
	data := command.StartSessionData{
		WorkingDirectory: dir, Objective: b.Objective, TemplateID: b.TemplateID, SkillIDs: b.SkillIDs,
		ModelID: b.ModelID, Name: b.Name, BudgetCapUsd: budget, WarnAtPercent: b.WarnAtPercent, ChainID: b.ChainID,
	}
	if a := b.AutoContinue; a != nil {
		cfg := &domain.AutoContinueConfig{MaxContinuations: a.MaxContinuations, IsEnabled: a.IsEnabled,
			ValidationCriteria: []domain.ValidationCriterion{}}
		if cfg.MaxContinuations == 0 {
			cfg.MaxContinuations = domain.DefaultMaxContinuations
		}
		for _, c := range a.ValidationCriteria {
			cfg.ValidationCriteria = append(cfg.ValidationCriteria, domain.ValidationCriterion{
				Type: domain.ValidationType(c.Type), Threshold: c.Threshold, CustomCommand: c.CustomCommand})
		}
		data.AutoContinue = cfg
	}
	if t := b.ToolApproval; t != nil {
		policy := domain.DefaultToolApprovalPolicy()
		policy.Mode, policy.Tools = domain.ApprovalMode(t.Mode), t.Tools
		if t.TimeoutSeconds > 0 {
			policy.Timeout = time.Duration(t.TimeoutSeconds) * time.Second
		}
		if t.OnTimeout != "" {
			policy.OnTimeout = domain.PermissionTimeoutBehavior(t.OnTimeout)
		}
		data.ToolApproval = &policy
	}
	raw, err := s.send(ctx, domain.AggregateSession, command.StartSession, id, data, startFields)
	if err != nil {
		return nil, err
	}
	res, err := decodeState[command.StartSessionResult](raw)
	if err != nil {
		return nil, err
	}
	out := &startSessionOutput{Location: "/api/agents/sessions/" + res.Session.ID.String()}
	out.Body = StartSessionResponse{Session: s.sessionDetail(res.Session), APIKey: res.APIKey}
	return out, nil
}

// readOwned checks the caller and the store, and parses the path's id of
// what the caller reads: a session, template, skill, chain or webhook.
func (s *Server) readOwned(ctx context.Context, rawID string) (owner, id uuid.UUID, err error) {
	if owner, err = s.reader(ctx); err != nil {
		return
	}
	id, err = parseID("path.id", rawID)
	return
}

// reader returns the owner a read endpoint answers for, once it knows it
// can answer (503 without queries).
func (s *Server) reader(ctx context.Context) (uuid.UUID, error) {
	owner, err := ownerUUID(ctx)
	if err != nil {
		return uuid.Nil, err
	}
	if s.deps.Queries == nil {
		return uuid.Nil, unavailable("queries")
	}
	return owner, nil
}

// parseID parses an id that Huma already checked is a UUID.
func parseID(field, raw string) (uuid.UUID, error) {
	id, err := uuid.Parse(raw)
	if err != nil {
		return uuid.Nil, NewKindError(KindValidation, "must be a UUID").WithField(field)
	}
	return id, nil
}

func (s *Server) listSessions(ctx context.Context, in *listSessionsInput) (*sessionListOutput, error) {
	owner, err := s.reader(ctx)
	if err != nil {
		return nil, err
	}
	params := queries.ListSessionsParams{Owner: owner,
		Status: domain.SessionStatus(in.Status), Paging: queries.Paging{Page: in.Page, PageSize: in.PageSize}}
	if in.TemplateID != "" {
		tmpl, err := parseID("query.templateId", in.TemplateID)
		if err != nil {
			return nil, err
		}
		params.TemplateID = &tmpl
	}
	page, err := s.deps.Queries.ListSessions(ctx, params)
	if err != nil {
		return nil, err
	}
	out := &sessionListOutput{Body: SessionList{Items: make([]SessionSummary, 0, len(page.Items)),
		Total: page.Total, Page: page.Page, PageSize: page.PageSize}}
	for _, it := range page.Items {
		out.Body.Items = append(out.Body.Items, SessionSummary{
			ID: it.ID, Name: it.Name, Status: string(it.Status), HasPendingReview: it.HasPendingReview,
			TotalCostUsd: usd(it.TotalCostUsd), ContextWindowUsagePercent: it.ContextWindowUsagePercent,
			TurnCount: it.TurnCount, ElapsedSeconds: int64(it.Elapsed / time.Second), EnabledSkillCount: it.EnabledSkillCount,
			ChainID: it.ChainID, TemplateID: it.TemplateID, CreatedAt: it.CreatedAt, StartedAt: it.StartedAt, CompletedAt: it.CompletedAt,
		})
	}
	return out, nil
}

func (s *Server) history(ctx context.Context, in *historyInput) (*historyOutput, error) {
	owner, err := s.reader(ctx)
	if err != nil {
		return nil, err
	}
	if !in.From.IsZero() && !in.To.IsZero() && !in.From.Before(in.To) {
		return nil, NewKindError(KindValidation, "from must be before to").WithField("query.from")
	}
	page, err := s.deps.Queries.History(ctx, queries.HistoryParams{Owner: owner, From: in.From, To: in.To,
		Paging: queries.Paging{Page: in.Page, PageSize: in.PageSize}})
	if err != nil {
		return nil, err
	}
	out := &historyOutput{Body: SessionHistory{Items: make([]HistoryItem, 0, len(page.Items)),
		Total: page.Total, Page: page.Page, PageSize: page.PageSize}}
	for _, it := range page.Items {
		h := HistoryItem{ID: it.ID, Name: it.Name, Status: string(it.Status), TotalCostUsd: usd(it.TotalCostUsd),
			DurationSeconds: int64(it.Duration / time.Second), Outcome: string(it.Outcome),
			CreatedAt: it.CreatedAt, StartedAt: it.StartedAt, CompletedAt: it.CompletedAt}
		if it.Failure != nil {
			h.FailureReason = string(it.Failure.Reason)
		}
		out.Body.Items = append(out.Body.Items, h)
	}
	return out, nil
}

func (s *Server) getSession(ctx context.Context, in *sessionIDInput) (*sessionOutput, error) {
	owner, id, err := s.readOwned(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	snap, err := s.deps.Queries.Session(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	out := &sessionOutput{Body: s.sessionDetail(snap)}
	if err := s.withWaitingFor(ctx, snap, &out.Body); err != nil {
		return nil, err
	}
	if s.deps.Runners != nil && snap.Status.HasSidecar() {
		if out.Body.Runner, out.Body.WaitingForRunner, err = s.deps.Runners.RunnerOf(ctx, id.String()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// RunnerPlaces tells where sessions' sidecars run (package runners).
type RunnerPlaces interface {
	// RunnerOf returns the runner the session's sidecar is assigned to,
	// or that it waits for one.
	RunnerOf(ctx context.Context, sessionID string) (runner string, waiting bool, err error)
}

func (s *Server) getTaskList(ctx context.Context, in *sessionIDInput) (*taskListOutput, error) {
	owner, id, err := s.readOwned(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	l, err := s.deps.Queries.TaskList(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return &taskListOutput{Body: SessionTaskList{SessionID: id, TaskList: taskListOf(l)}}, nil
}

func (s *Server) getPlan(ctx context.Context, in *sessionIDInput) (*planOutput, error) {
	owner, id, err := s.readOwned(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	p, err := s.deps.Queries.Plan(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return &planOutput{Body: SessionPlan{SessionID: id, Plan: planOf(p)}}, nil
}

func (s *Server) getMetrics(ctx context.Context, in *sessionIDInput) (*metricsOutput, error) {
	owner, id, err := s.readOwned(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	m, err := s.deps.Queries.Metrics(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return &metricsOutput{Body: metricsOf(m)}, nil
}

// workingDirectory confines a new session to its owner's part of the
// workspace: the requested directory, or one named after the session.
func (s *Server) workingDirectory(ctx context.Context, requested string, session uuid.UUID) (string, error) {
	owner, err := ownerUUID(ctx)
	if err != nil {
		return "", err
	}
	dir, err := s.cfg.Workspace.Resolve(owner, requested, session.String())
	if errors.Is(err, workspace.ErrOutside) {
		return "", NewKindError(KindValidation, "workingDirectory must be inside your workspace, "+
			filepath.Join(string(s.cfg.Workspace), owner.String())+" (symlinks followed)").WithField("workingDirectory")
	}
	if err != nil {
		return "", err
	}
	return dir, nil
}
