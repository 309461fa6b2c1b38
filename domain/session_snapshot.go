package domain

import (
	"slices"
	"time"

	"github.com/google/uuid"
)

// AgentSessionSnapshot is the full state of an AgentSession as plain
// values: what a repository stores and reads back. Only persistence should
// build one by hand.
type AgentSessionSnapshot struct {
	ID                uuid.UUID           `json:"id"`
	OwnerID           uuid.UUID           `json:"ownerId"`
	TemplateID        *uuid.UUID          `json:"templateId,omitempty"`
	ChainID           *uuid.UUID          `json:"chainId,omitempty"`
	ForkedFrom        *ForkPoint          `json:"forkedFrom,omitempty"`
	Name              string              `json:"name"`
	WorkingDirectory  string              `json:"workingDirectory"`
	Objective         string              `json:"objective"`
	ModelID           string              `json:"modelId"`
	EnabledSkillIDs   []uuid.UUID         `json:"enabledSkillIds"`
	Status            SessionStatus       `json:"status"`
	HasPendingReview  bool                `json:"hasPendingReview"`
	ExecutionMode     ExecutionMode       `json:"executionMode"`
	Budget            SessionBudget       `json:"budget"`
	Metrics           SessionMetrics      `json:"metrics"`
	AutoContinue      *AutoContinueConfig `json:"autoContinue,omitempty"`
	TaskList          *SessionTaskList    `json:"taskList,omitempty"`
	Plan              *SessionPlan        `json:"plan,omitempty"`
	APIKeyHash        string              `json:"apiKeyHash,omitempty"`
	SidecarKeyHash    string              `json:"sidecarKeyHash,omitempty"`
	Output            *SessionOutput      `json:"output,omitempty"`
	Failure           *Failure            `json:"failure,omitempty"`
	RetryCount        int                 `json:"retryCount"`
	RetryInstruction  string              `json:"retryInstruction,omitempty"`
	Engine            string              `json:"engine,omitempty"`
	TraceID           string              `json:"traceId,omitempty"`
	ToolApproval      ToolApprovalPolicy  `json:"toolApproval"`
	Timeouts          SessionTimeouts     `json:"timeouts"`
	PendingQuestion   *UserQuestion       `json:"pendingQuestion,omitempty"`
	PendingPermission *PermissionRequest  `json:"pendingPermission,omitempty"`
	PausedAt          *time.Time          `json:"pausedAt,omitempty"`
	ReloadPending     bool                `json:"reloadPending"`
	AwaitedAcks       []AwaitedAck        `json:"awaitedAcks,omitempty"`
	SidecarCommandSeq int64               `json:"sidecarCommandSeq,omitempty"`
	StartedAt         *time.Time          `json:"startedAt,omitempty"`
	CompletedAt       *time.Time          `json:"completedAt,omitempty"`
	CreatedAt         time.Time           `json:"createdAt"`
	UpdatedAt         time.Time           `json:"updatedAt"`
	// Version is the stored version, for the optimistic lock.
	Version int64 `json:"version"`
}

// Snapshot returns the session's state as plain values (deep copies).
func (s *AgentSession) Snapshot() AgentSessionSnapshot {
	return AgentSessionSnapshot{
		ID: s.id, OwnerID: s.ownerID, TemplateID: s.TemplateID(), ChainID: s.ChainID(), ForkedFrom: s.ForkedFrom(),
		Name: s.name, WorkingDirectory: s.workingDirectory, Objective: s.objective, ModelID: s.modelID,
		EnabledSkillIDs: s.EnabledSkillIDs(), Status: s.status, HasPendingReview: s.hasPendingReview,
		ExecutionMode: s.executionMode, Budget: s.budget, Metrics: s.Metrics(),
		AutoContinue: s.AutoContinue(), TaskList: s.TaskList(), Plan: s.Plan(),
		APIKeyHash: s.apiKeyHash, SidecarKeyHash: s.sidecarKeyHash, Output: s.Output(), Failure: s.Failure(),
		RetryCount: s.retryCount, RetryInstruction: s.retryInstruction, Engine: s.engine, TraceID: s.traceID,
		ToolApproval: s.ToolApproval(), Timeouts: s.timeouts,
		PendingQuestion: s.PendingQuestion(), PendingPermission: s.PendingPermission(),
		PausedAt: s.PausedAt(), ReloadPending: s.reloadPending,
		AwaitedAcks: s.AwaitedAcks(), SidecarCommandSeq: s.sidecarCommandSeq,
		StartedAt: s.StartedAt(), CompletedAt: s.CompletedAt(),
		CreatedAt: s.createdAt, UpdatedAt: s.updatedAt, Version: s.version,
	}
}

// UnmarshalAgentSessionFromDatabase rebuilds a session from its stored
// state. It is for repositories only: it raises no event and checks only
// that the state is one the model can produce, so corrupt rows fail loudly
// instead of misbehaving later.
func UnmarshalAgentSessionFromDatabase(snap AgentSessionSnapshot) (*AgentSession, error) {
	if err := checkSnapshot(snap); err != nil {
		return nil, err
	}
	s := &AgentSession{
		id: snap.ID, ownerID: snap.OwnerID, templateID: clonePtr(snap.TemplateID), chainID: clonePtr(snap.ChainID),
		forkedFrom: clonePtr(snap.ForkedFrom),
		name:       snap.Name, workingDirectory: snap.WorkingDirectory, objective: snap.Objective, modelID: snap.ModelID,
		enabledSkillIDs: cloneIDs(snap.EnabledSkillIDs), status: snap.Status, hasPendingReview: snap.HasPendingReview,
		executionMode: snap.ExecutionMode, budget: snap.Budget, metrics: snap.Metrics.clone(),
		autoContinue: cloneAutoContinue(snap.AutoContinue),
		apiKeyHash:   snap.APIKeyHash, sidecarKeyHash: snap.SidecarKeyHash, output: clonePtr(snap.Output), failure: clonePtr(snap.Failure),
		retryCount: snap.RetryCount, retryInstruction: snap.RetryInstruction, engine: snap.Engine, traceID: snap.TraceID,
		toolApproval: snap.ToolApproval.clone(), timeouts: snap.Timeouts,
		permission: clonePtr(snap.PendingPermission), pausedAt: clonePtr(snap.PausedAt),
		reloadPending: snap.ReloadPending, awaited: slices.Clone(snap.AwaitedAcks), sidecarCommandSeq: snap.SidecarCommandSeq,
		startedAt: clonePtr(snap.StartedAt), completedAt: clonePtr(snap.CompletedAt),
		createdAt: snap.CreatedAt, updatedAt: snap.UpdatedAt, version: snap.Version,
	}
	if snap.TaskList != nil {
		l := *snap.TaskList
		l.Tasks = slices.Clone(l.Tasks)
		s.taskList = &l
	}
	if snap.Plan != nil {
		p := *snap.Plan
		p.ApprovedAt = clonePtr(p.ApprovedAt)
		s.plan = &p
	}
	if snap.PendingQuestion != nil {
		q := *snap.PendingQuestion
		q.Options = slices.Clone(q.Options)
		s.question = &q
	}
	return s, nil
}

// checkSnapshot reports the first part of snap that the model cannot
// produce.
func checkSnapshot(snap AgentSessionSnapshot) error {
	if err := requireID("id", snap.ID); err != nil {
		return err
	}
	if err := requireID("ownerId", snap.OwnerID); err != nil {
		return err
	}
	if !snap.Status.IsValid() {
		return invalid("status", "unknown session status %q", snap.Status)
	}
	if !snap.ExecutionMode.IsValid() {
		return invalid("executionMode", "unknown execution mode %q", snap.ExecutionMode)
	}
	if snap.Objective == "" || snap.Name == "" || snap.ModelID == "" || snap.WorkingDirectory == "" {
		return invalid("session", "objective, name, model and working directory must be set")
	}
	if err := snap.Budget.Validate(); err != nil {
		return err
	}
	if err := snap.ToolApproval.Validate(); err != nil {
		return err
	}
	if err := snap.Timeouts.Validate(); err != nil {
		return err
	}
	if snap.RetryCount < 0 || snap.RetryCount > MaxRetries {
		return invalid("retryCount", "must be between 0 and %d", MaxRetries)
	}
	return checkSnapshotWaiting(snap)
}

// checkSnapshotWaiting reports a waiting status without what it waits for.
func checkSnapshotWaiting(snap AgentSessionSnapshot) error {
	if snap.Status == StatusWaitingForInput && snap.PendingQuestion == nil {
		return invalid("pendingQuestion", "a session waiting for input must have a question")
	}
	if snap.Status == StatusWaitingForApproval && snap.PendingPermission == nil &&
		(snap.Plan == nil || snap.Plan.Status != PlanPendingApproval) {
		return invalid("status", "a session waiting for approval must have a plan or a tool use pending")
	}
	return nil
}
