package domain

import (
	"slices"
	"time"

	"github.com/google/uuid"
)

// ID returns the session id.
func (s *AgentSession) ID() uuid.UUID { return s.id }

// OwnerID returns the user who owns the session.
func (s *AgentSession) OwnerID() uuid.UUID { return s.ownerID }

// TemplateID returns the template the session came from, or nil.
func (s *AgentSession) TemplateID() *uuid.UUID { return clonePtr(s.templateID) }

// ChainID returns the chain the session belongs to, or nil.
func (s *AgentSession) ChainID() *uuid.UUID { return clonePtr(s.chainID) }

// Name returns the session's display name.
func (s *AgentSession) Name() string { return s.name }

// WorkingDirectory returns the absolute path the agent runs in.
func (s *AgentSession) WorkingDirectory() string { return s.workingDirectory }

// Objective returns what the agent was asked to do.
func (s *AgentSession) Objective() string { return s.objective }

// ModelID returns the model the session runs.
func (s *AgentSession) ModelID() string { return s.modelID }

// EnabledSkillIDs returns the enabled skills, in composition order.
func (s *AgentSession) EnabledSkillIDs() []uuid.UUID { return cloneIDs(s.enabledSkillIDs) }

// Status returns the lifecycle status.
func (s *AgentSession) Status() SessionStatus { return s.status }

// HasPendingReview reports output waiting for the owner's approval.
func (s *AgentSession) HasPendingReview() bool { return s.hasPendingReview }

// ExecutionMode returns how the session was launched.
func (s *AgentSession) ExecutionMode() ExecutionMode { return s.executionMode }

// Budget returns the cap and the spend.
func (s *AgentSession) Budget() SessionBudget { return s.budget }

// Metrics returns a copy of the metrics.
func (s *AgentSession) Metrics() SessionMetrics { return s.metrics.clone() }

// AutoContinue returns the auto-continue settings, or nil when disabled.
func (s *AgentSession) AutoContinue() *AutoContinueConfig { return cloneAutoContinue(s.autoContinue) }

// TaskList returns the agent's latest task list, or nil.
func (s *AgentSession) TaskList() *SessionTaskList {
	if s.taskList == nil {
		return nil
	}
	l := *s.taskList
	l.Tasks = slices.Clone(l.Tasks)
	return &l
}

// Plan returns the plan document, or nil.
func (s *AgentSession) Plan() *SessionPlan {
	if s.plan == nil {
		return nil
	}
	p := *s.plan
	p.ApprovedAt = clonePtr(p.ApprovedAt)
	return &p
}

// APIKeyHash returns the hex SHA-256 of the session's API key, or "".
func (s *AgentSession) APIKeyHash() string { return s.apiKeyHash }

// SidecarKeyHash returns the hex SHA-256 of the key of the session's
// current sidecar, or "".
func (s *AgentSession) SidecarKeyHash() string { return s.sidecarKeyHash }

// Output returns what the last delivering turn produced, or nil.
func (s *AgentSession) Output() *SessionOutput { return clonePtr(s.output) }

// Failure returns why the session failed, or nil.
func (s *AgentSession) Failure() *Failure { return clonePtr(s.failure) }

// RetryCount returns how many times the session was retried.
func (s *AgentSession) RetryCount() int { return s.retryCount }

// Engine returns the sidecar engine the session's agent runs on, or ""
// before its first sidecar started.
func (s *AgentSession) Engine() string { return s.engine }

// TraceID returns the W3C trace id of the request that created the
// session, or "" when it came without a trace.
func (s *AgentSession) TraceID() string { return s.traceID }

// RetryInstruction returns the extra instruction of the last retry, or "".
func (s *AgentSession) RetryInstruction() string { return s.retryInstruction }

// ToolApproval returns the tool approval policy.
func (s *AgentSession) ToolApproval() ToolApprovalPolicy { return s.toolApproval.clone() }

// Timeouts returns the waiting limits.
func (s *AgentSession) Timeouts() SessionTimeouts { return s.timeouts }

// PendingQuestion returns the question the session waits on, or nil.
func (s *AgentSession) PendingQuestion() *UserQuestion {
	if s.question == nil {
		return nil
	}
	q := *s.question
	q.Options = slices.Clone(q.Options)
	return &q
}

// PendingPermission returns the tool use waiting for approval, or nil.
func (s *AgentSession) PendingPermission() *PermissionRequest { return clonePtr(s.permission) }

// ReloadPending reports a configuration reload waiting for its ack.
func (s *AgentSession) ReloadPending() bool { return s.reloadPending }

// StartedAt returns when the current run started, or nil.
func (s *AgentSession) StartedAt() *time.Time { return clonePtr(s.startedAt) }

// CompletedAt returns when the current run ended (Completed, Failed or
// Cancelled), or nil.
func (s *AgentSession) CompletedAt() *time.Time { return clonePtr(s.completedAt) }

// CreatedAt returns when the session was created.
func (s *AgentSession) CreatedAt() time.Time { return s.createdAt }

// UpdatedAt returns when the session last changed.
func (s *AgentSession) UpdatedAt() time.Time { return s.updatedAt }

// Version returns the version the session was loaded at (0 for a new
// one), for the repository's optimistic lock.
func (s *AgentSession) Version() int64 { return s.version }
