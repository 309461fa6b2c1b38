package domain

import (
	"strings"
	"time"

	"github.com/google/uuid"
)

// Limits of an AgentSession's values.
const (
	MaxObjectiveChars   = 2000
	MaxSessionNameChars = 200
	MaxQuestionChars    = 10000
	MaxAnswerChars      = 4000
	MaxFeedbackChars    = 4000
	// MaxRetries is how many times a failed session may be retried.
	MaxRetries = 3
)

// AgentSession is the aggregate root of one agent run: its lifecycle
// (SessionStatus and the transition table), budget, metrics, review state,
// plan, task list, skills and the questions and permissions it waits on.
// It is changed only through its methods, each of which either succeeds and
// raises events or returns a typed error and changes nothing.
type AgentSession struct {
	eventRecorder

	id               uuid.UUID
	ownerID          uuid.UUID
	templateID       *uuid.UUID
	chainID          *uuid.UUID
	forkedFrom       *ForkPoint
	name             string
	workingDirectory string
	objective        string
	modelID          string
	// engine is the sidecar engine the session's agent runs on, pinned
	// when its first sidecar got its key: its conversation exists only in
	// that engine.
	engine string
	// traceID is the W3C trace id of the request that created the
	// session, "" when it came without a trace.
	traceID          string
	enabledSkillIDs  []uuid.UUID
	status           SessionStatus
	hasPendingReview bool
	executionMode    ExecutionMode
	budget           SessionBudget
	metrics          SessionMetrics
	autoContinue     *AutoContinueConfig
	taskList         *SessionTaskList
	plan             *SessionPlan
	apiKeyHash       string
	sidecarKeyHash   string
	output           *SessionOutput
	failure          *Failure
	retryCount       int
	retryInstruction string
	toolApproval     ToolApprovalPolicy
	timeouts         SessionTimeouts
	question         *UserQuestion
	permission       *PermissionRequest
	pausedAt         *time.Time
	reloadPending    bool
	// awaited are the sidecar commands sent and not yet acknowledged;
	// sidecarCommandSeq numbers the commands the session sent.
	awaited           []AwaitedAck
	sidecarCommandSeq int64
	startedAt         *time.Time
	completedAt       *time.Time
	createdAt         time.Time
	updatedAt         time.Time
	version           int64
}

// NewSessionParams are the inputs of NewAgentSession.
type NewSessionParams struct {
	ID      uuid.UUID
	OwnerID uuid.UUID
	// TemplateID is the template the session was configured from, if any.
	TemplateID *uuid.UUID
	// ChainID is the chain the session continues, if any.
	ChainID *uuid.UUID
	// Name is optional; it defaults to the objective's first line.
	Name             string
	WorkingDirectory string
	Objective        string
	ModelID          string
	EnabledSkillIDs  []uuid.UUID
	// ExecutionMode defaults to Standalone.
	ExecutionMode ExecutionMode
	Budget        SessionBudget
	AutoContinue  *AutoContinueConfig
	// ToolApproval defaults to DefaultToolApprovalPolicy.
	ToolApproval *ToolApprovalPolicy
	// Timeouts defaults to DefaultSessionTimeouts.
	Timeouts *SessionTimeouts
	// TraceID is the W3C trace id (32 lowercase hex digits) of the request
	// that creates the session, if it came with a trace.
	TraceID string
	// ForkedFrom is the checkpoint a forked session starts from.
	ForkedFrom *ForkPoint
	Now        time.Time
}

// NewAgentSession validates p and returns a Queued session that raised
// AgentSessionCreatedEvent. Generate its API key, then start it through
// the SessionPool.
func NewAgentSession(p NewSessionParams) (*AgentSession, error) {
	if err := requireID("id", p.ID); err != nil {
		return nil, err
	}
	if err := requireID("ownerId", p.OwnerID); err != nil {
		return nil, err
	}
	now := p.Now.UTC()
	s := &AgentSession{
		id: p.ID, ownerID: p.OwnerID, status: StatusQueued, traceID: p.TraceID,
		forkedFrom: clonePtr(p.ForkedFrom), templateID: clonePtr(p.TemplateID), chainID: clonePtr(p.ChainID),
		createdAt: now, updatedAt: now,
	}
	for _, step := range []func(*AgentSession, NewSessionParams) error{
		(*AgentSession).initWork, (*AgentSession).initLimits, checkSessionLinks,
	} {
		if err := step(s, p); err != nil {
			return nil, err
		}
	}
	s.raise(AgentSessionCreatedEvent{
		SessionMeta: s.meta(now), Name: s.name, WorkingDirectory: s.workingDirectory, Objective: s.objective,
		ModelID: s.modelID, TemplateID: clonePtr(p.TemplateID), ChainID: clonePtr(p.ChainID),
		BudgetCapUsd: s.budget.HardCapUsd,
	})
	if p.ForkedFrom != nil {
		s.raise(SessionForkedEvent{SessionMeta: s.meta(now), ParentSessionID: p.ForkedFrom.SessionID, Checkpoint: p.ForkedFrom.Turn})
	}
	return s, nil
}

// initWork validates and sets what the session works on and how: its
// objective, name, directory, model, skills and execution mode.
func (s *AgentSession) initWork(p NewSessionParams) error {
	objective, err := requireText("objective", p.Objective, 1, MaxObjectiveChars)
	if err != nil {
		return err
	}
	name := p.Name
	if strings.TrimSpace(name) == "" {
		name = nameFromObjective(objective)
	}
	if name, err = requireText("name", name, 1, MaxSessionNameChars); err != nil {
		return err
	}
	dir, err := requireAbsolutePath("workingDirectory", p.WorkingDirectory)
	if err != nil {
		return err
	}
	model, err := requireText("modelId", p.ModelID, 1, 200)
	if err != nil {
		return err
	}
	skills, err := uniqueIDs("enabledSkillIds", p.EnabledSkillIDs)
	if err != nil {
		return err
	}
	mode := p.ExecutionMode
	if mode == "" {
		mode = ModeStandalone
	}
	if !mode.IsValid() {
		return invalid("executionMode", "unknown execution mode %q", mode)
	}
	s.objective, s.name, s.workingDirectory, s.modelID, s.enabledSkillIDs, s.executionMode = objective, name, dir, model, skills, mode
	return nil
}

// initLimits validates and sets what bounds the session: its budget,
// auto-continue, tool approval policy and timeouts, each defaulted.
func (s *AgentSession) initLimits(p NewSessionParams) error {
	budget := SessionBudget{HardCapUsd: p.Budget.HardCapUsd, WarnAtPercent: p.Budget.WarnAtPercent}
	if budget.WarnAtPercent == 0 {
		budget.WarnAtPercent = DefaultWarnAtPercent
	}
	if err := budget.Validate(); err != nil {
		return err
	}
	if p.AutoContinue != nil {
		if err := p.AutoContinue.Validate(); err != nil {
			return err
		}
	}
	policy := DefaultToolApprovalPolicy()
	if p.ToolApproval != nil {
		policy = p.ToolApproval.clone()
	}
	if err := policy.Validate(); err != nil {
		return err
	}
	timeouts := DefaultSessionTimeouts()
	if p.Timeouts != nil {
		timeouts = *p.Timeouts
	}
	if err := timeouts.Validate(); err != nil {
		return err
	}
	s.budget, s.autoContinue, s.toolApproval, s.timeouts = budget, cloneAutoContinue(p.AutoContinue), policy, timeouts
	return nil
}

// checkSessionLinks validates what ties the new session to others and to
// its request: its template, chain, trace and fork point.
func checkSessionLinks(_ *AgentSession, p NewSessionParams) error {
	if p.TemplateID != nil {
		if err := requireID("templateId", *p.TemplateID); err != nil {
			return err
		}
	}
	if p.ChainID != nil {
		if err := requireID("chainId", *p.ChainID); err != nil {
			return err
		}
	}
	if p.TraceID != "" && !validTraceID(p.TraceID) {
		return invalid("traceId", "must be 32 lowercase hex digits, not all zero")
	}
	if p.ForkedFrom != nil {
		return p.ForkedFrom.Validate()
	}
	return nil
}

// validTraceID reports whether id is a W3C trace id: 32 lowercase hex
// digits, not all zero.
func validTraceID(id string) bool {
	if len(id) != 32 || strings.Trim(id, "0") == "" {
		return false
	}
	for _, c := range id {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// nameFromObjective derives a session name: the objective's first line,
// cut to MaxSessionNameChars.
func nameFromObjective(objective string) string { return firstLine(objective, MaxSessionNameChars) }

func uniqueIDs(field string, ids []uuid.UUID) ([]uuid.UUID, error) {
	seen := make(map[uuid.UUID]bool, len(ids))
	for _, id := range ids {
		if id == uuid.Nil {
			return nil, invalid(field, "must not contain the nil id")
		}
		if seen[id] {
			return nil, invalid(field, "id %s appears twice", id)
		}
		seen[id] = true
	}
	return cloneIDs(ids), nil
}

// meta is the common part of the session's events.
func (s *AgentSession) meta(now time.Time) SessionMeta {
	return SessionMeta{SessionID: s.id, OwnerID: s.ownerID, OccurredAt: now.UTC()}
}

// refuse builds the error for op refused in the current status.
func (s *AgentSession) refuse(op Operation, reason error) error {
	return &TransitionError{Aggregate: "AgentSession", Operation: string(op), Status: string(s.status), Reason: reason}
}

// allow checks that the table has op from the current status in some case.
func (s *AgentSession) allow(op Operation) error {
	if !CanPerform(s.status, op) {
		return s.refuse(op, ErrInvalidTransition)
	}
	return nil
}

// target looks up where op in case c leads from the current status.
func (s *AgentSession) target(op Operation, c Case) (SessionStatus, error) {
	to, ok := NextStatus(op, s.status, c)
	if !ok {
		return "", s.refuse(op, ErrInvalidTransition)
	}
	return to, nil
}

// guardBudget refuses a move into Running while the cap is spent.
func (s *AgentSession) guardBudget(op Operation, to SessionStatus) error {
	if to == StatusRunning && s.budget.IsSpent() {
		return s.refuse(op, ErrBudgetExhausted)
	}
	return nil
}

// moveTo applies a looked-up transition and the bookkeeping every status
// change needs: UpdatedAt, CompletedAt (set once, on the first terminal
// closure) and the time a pause began.
func (s *AgentSession) moveTo(to SessionStatus, now time.Time) {
	now = now.UTC()
	s.status = to
	s.updatedAt = now
	switch to {
	case StatusCompleted, StatusFailed, StatusCancelled:
		if s.completedAt == nil {
			s.completedAt = &now
		}
	}
	if to == StatusPaused {
		s.pausedAt = &now
	} else {
		s.pausedAt = nil
	}
	if to != StatusWaitingForInput {
		s.question = nil
	}
	if to != StatusWaitingForApproval {
		s.permission = nil
	}
}
