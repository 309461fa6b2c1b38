package command

import (
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/domain"
)

// The commands of the session aggregate, sent on agents.cmd.session.<name>
// with the session id as the command's aggregateId. Commands marked
// internal are sent by workers (the anti-corruption layer and reactions)
// rather than by people.
const (
	StartSession      = "start_session"
	InterruptSession  = "interrupt_session"
	PauseSession      = "pause_session"
	ResumeSession     = "resume_session"
	CancelSession     = "cancel_session"
	ApproveOutput     = "approve_output"
	RejectOutput      = "reject_output"
	CloseSession      = "close_session"
	RetrySession      = "retry_session"
	AnswerQuestion    = "answer_question"
	ApprovePlan       = "approve_plan"
	RejectPlan        = "reject_plan"
	EnableSkill       = "enable_skill"
	DisableSkill      = "disable_skill"
	ReloadSession     = "reload_session"
	RaiseBudget       = "raise_budget"
	AllowPermission   = "allow_permission"
	DenyPermission    = "deny_permission"
	RecordAgentOutput = "record_output"

	// Internal commands.
	ConfirmInterrupted        = "confirm_interrupted"
	ConfirmPaused             = "confirm_paused"
	ConfirmResumed            = "confirm_resumed"
	ConfirmCancelled          = "confirm_cancelled"
	ConfirmReloaded           = "confirm_reloaded"
	BeginTurn                 = "begin_turn"
	RecordTurnCompleted       = "record_turn_completed"
	RecordContextExhausted    = "record_context_exhausted"
	RecordContextNearingLimit = "record_context_nearing_limit"
	RecordQuestionAsked       = "record_question_asked"
	RecordPlanCreated         = "record_plan_created"
	RecordPlanPending         = "record_plan_pending_approval"
	UpdateTaskList            = "update_task_list"
	RecordVoluntaryHandoff    = "record_voluntary_handoff"
	RecordFailure             = "record_failure"
	UpdateMetrics             = "update_metrics"
	RequestPermission         = "request_permission"
	ExpireTimeouts            = "expire_timeouts"
	RecordAutoContinuation    = "record_auto_continuation"
	FailHandoff               = "fail_handoff"
	StopAutoContinuation      = "stop_auto_continuation"
	AllocateSession           = "allocate_session"
)

// RewindSession takes a session back to a checkpoint (RewindData).
const RewindSession = "rewind_session"

// RewindData names the checkpoint a session is rewound to.
type RewindData struct {
	// Turn is the checkpoint's turn.
	Turn int `json:"checkpoint"`
}

// StartSessionData creates a session (Queued) and its agent API key.
type StartSessionData struct {
	WorkingDirectory string                     `json:"workingDirectory"`
	Objective        string                     `json:"objective"`
	TemplateID       *uuid.UUID                 `json:"templateId,omitempty"`
	SkillIDs         []uuid.UUID                `json:"skillIds,omitempty"`
	ModelID          string                     `json:"modelId,omitempty"`
	Name             string                     `json:"name,omitempty"`
	BudgetCapUsd     domain.USD                 `json:"budgetCapUsd"`
	WarnAtPercent    int                        `json:"warnAtPercent,omitempty"`
	AutoContinue     *domain.AutoContinueConfig `json:"autoContinue,omitempty"`
	ChainID          *uuid.UUID                 `json:"chainId,omitempty"`
	ToolApproval     *domain.ToolApprovalPolicy `json:"toolApproval,omitempty"`
	// Consolidates makes the session a skill consolidation session: once
	// its output is approved, that output becomes the skill's new
	// instructions and the pills are marked Consolidated.
	Consolidates *SkillConsolidation `json:"consolidates,omitempty"`
	// ForkedFrom makes the session a fork of another session of the same
	// owner, from the checkpoint of one of its turns.
	ForkedFrom *domain.ForkPoint `json:"forkedFrom,omitempty"`
}

// SkillConsolidation is what a consolidation session folds in: memory
// pills of a skill the session has enabled.
type SkillConsolidation struct {
	SkillID uuid.UUID   `json:"skillId"`
	PillIDs []uuid.UUID `json:"pillIds"`
}

// StartSessionResult is the state of StartSession plus the plaintext API
// key, which is returned once and never stored.
type StartSessionResult struct {
	Session domain.AgentSessionSnapshot `json:"session"`
	APIKey  string                      `json:"apiKey,omitempty"`
}

// AckData carries the command id a sidecar's ack echoes (the Confirm*
// commands); only the awaited command's id confirms anything.
type AckData struct {
	CommandID uuid.UUID `json:"commandId"`
}

// CancelData says how CancelSession stops the agent; empty data is a
// graceful cancel.
type CancelData struct {
	// Force abandons the agent at once instead of letting it stop.
	Force bool `json:"force,omitempty"`
}

// ReasonData carries an optional reason (RejectOutput).
type ReasonData struct {
	Reason string `json:"reason,omitempty"`
}

// RetryData carries an optional extra instruction for the retry.
type RetryData struct {
	AdditionalInstruction string `json:"additionalInstruction,omitempty"`
}

// AnswerData answers the question a session waits on.
type AnswerData struct {
	Answer string `json:"answer"`
}

// FeedbackData carries the feedback of a rejected plan.
type FeedbackData struct {
	Feedback string `json:"feedback"`
}

// SkillData names a skill to enable or disable.
type SkillData struct {
	SkillID uuid.UUID `json:"skillId"`
}

// BudgetData raises a session's hard cap.
type BudgetData struct {
	HardCapUsd domain.USD `json:"hardCapUsd"`
}

// PermissionDecisionData answers a pending tool permission request.
type PermissionDecisionData struct {
	RequestID string `json:"requestId"`
	Message   string `json:"message,omitempty"`
}

// OutputData records a session's output for review.
type OutputData struct {
	Output domain.SessionOutput `json:"output"`
}

// UsageData carries a usage percentage (RecordContextNearingLimit).
type UsageData struct {
	UsagePercent float64 `json:"usagePercent"`
}

// QuestionData records a question the agent asked.
type QuestionData struct {
	Content string   `json:"content"`
	Options []string `json:"options,omitempty"`
}

// PlanData records a plan, and whether it needs approval.
type PlanData struct {
	Content          string `json:"content"`
	RequiresApproval bool   `json:"requiresApproval,omitempty"`
}

// TaskListData replaces the session's task list.
type TaskListData struct {
	Tasks []domain.SessionTask `json:"tasks"`
}

// HandoffData records a voluntary handoff.
type HandoffData struct {
	Reason        string `json:"reason"`
	Summary       string `json:"summary"`
	RemainingWork string `json:"remainingWork"`
}

// FailureData records a failure.
type FailureData struct {
	Reason  domain.FailureReason `json:"reason"`
	Message string               `json:"message"`
}

// PermissionRequestData records a tool's request for approval.
type PermissionRequestData struct {
	RequestID string `json:"requestId"`
	ToolName  string `json:"toolName"`
	Input     string `json:"input"`
}

// MetricsData is one usage report (UpdateMetrics).
type MetricsData struct {
	SubAgentID    *uuid.UUID                   `json:"subAgentId,omitempty"`
	ModelID       string                       `json:"modelId"`
	CostUsd       domain.USD                   `json:"costUsd"`
	Tokens        domain.TokenUsage            `json:"tokens"`
	ContextWindow domain.ContextWindowSnapshot `json:"contextWindow"`
}

// ReleaseSession gives back the pool slot of a session that ended (internal).
const ReleaseSession = "release_session"

// AllocateResult says whether AllocateSession started the session or left
// it Queued because the owner's pool is full.
type AllocateResult struct {
	Allocated bool                        `json:"allocated"`
	Session   domain.AgentSessionSnapshot `json:"session"`
}
