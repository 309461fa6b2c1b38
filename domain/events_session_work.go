package domain

import (
	"time"

	"github.com/google/uuid"
)

// SessionWaitingForInputEvent records that the agent asked a question (Running -> WaitingForInput).
type SessionWaitingForInputEvent struct {
	SessionMeta
	QuestionContent string    `json:"questionContent"`
	Options         []string  `json:"options,omitempty"`
	ExpiresAt       time.Time `json:"expiresAt"`
}

// SessionInputReceivedEvent records that the question was answered (WaitingForInput -> Running);
// send `answer_question`.
type SessionInputReceivedEvent struct {
	SessionMeta
	Answer string `json:"answer"`
	// ByTimeout is true when the configured default answer was used.
	ByTimeout bool `json:"byTimeout"`
}

// SessionInputTimedOutEvent records that nobody answered the question in time.
type SessionInputTimedOutEvent struct {
	SessionMeta
	DefaultAnswerUsed bool `json:"defaultAnswerUsed"`
}

// SessionPlanCreatedEvent records that the agent entered plan mode.
type SessionPlanCreatedEvent struct{ SessionMeta }

// SessionPlanPendingApprovalEvent records that the agent submitted its plan.
type SessionPlanPendingApprovalEvent struct {
	SessionMeta
	RequiresApproval bool `json:"requiresApproval"`
	PlanVersion      int  `json:"planVersion"`
}

// SessionPlanApprovedEvent records that the plan was approved (by the owner, or
// automatically when no approval is required); send `plan_decision`.
type SessionPlanApprovedEvent struct {
	SessionMeta
	Automatic bool `json:"automatic"`
}

// SessionPlanRejectedEvent records that the owner rejected the plan; the feedback goes
// to the agent so it can revise.
type SessionPlanRejectedEvent struct {
	SessionMeta
	Feedback string `json:"feedback"`
}

// SessionTaskListUpdatedEvent records that the agent's task list was replaced.
type SessionTaskListUpdatedEvent struct {
	SessionMeta
	TaskCount      int `json:"taskCount"`
	CompletedCount int `json:"completedCount"`
}

// SessionSkillEnabledEvent records that a skill was enabled on the session.
type SessionSkillEnabledEvent struct {
	SessionMeta
	SkillID uuid.UUID `json:"skillId"`
}

// SessionSkillDisabledEvent records that a skill was disabled on the session.
type SessionSkillDisabledEvent struct {
	SessionMeta
	SkillID uuid.UUID `json:"skillId"`
}

// SessionReloadRequestedEvent asks to send `reload_config` with the composed config.
type SessionReloadRequestedEvent struct {
	SessionMeta
	EnabledSkillIDs []uuid.UUID `json:"enabledSkillIds"`
	// CommandID is the id of the `reload_config` sent to the sidecar; its
	// ack echoes it.
	CommandID uuid.UUID `json:"commandId"`
}

// SessionReloadedEvent records that the sidecar runs the new configuration (reload_config_ack).
type SessionReloadedEvent struct{ SessionMeta }

// SessionMetricsUpdatedEvent records that a usage report was recorded.
type SessionMetricsUpdatedEvent struct {
	SessionMeta
	TotalCostUsd              USD        `json:"totalCostUsd"`
	ContextWindowUsagePercent float64    `json:"contextWindowUsagePercent"`
	TurnCount                 int        `json:"turnCount"`
	SubAgentID                *uuid.UUID `json:"subAgentId,omitempty"`
}

// SessionBudgetWarningEvent records that spend crossed WarnAtPercent of the cap (once per cap).
type SessionBudgetWarningEvent struct {
	SessionMeta
	SpentUsd    USD     `json:"spentUsd"`
	CapUsd      USD     `json:"capUsd"`
	PercentUsed float64 `json:"percentUsed"`
}

// SessionBudgetExhaustedEvent records that spend reached the cap (once per cap); a
// running session is asked to pause.
type SessionBudgetExhaustedEvent struct {
	SessionMeta
	SpentUsd USD `json:"spentUsd"`
	CapUsd   USD `json:"capUsd"`
}

// SessionBudgetRaisedEvent records that the owner raised the cap.
type SessionBudgetRaisedEvent struct {
	SessionMeta
	PreviousCapUsd USD `json:"previousCapUsd"`
	CapUsd         USD `json:"capUsd"`
	SpentUsd       USD `json:"spentUsd"`
}

// SessionAutoContinuedEvent records that validation failed after a turn and the
// session continues on its own.
type SessionAutoContinuedEvent struct {
	SessionMeta
	ContinuationCount int `json:"continuationCount"`
	MaxContinuations  int `json:"maxContinuations"`
}

// SessionAutoContinueExhaustedEvent records that validation still failed
// once MaxContinuations were spent: the loop stopped and the session waits,
// Idle and without pending review, for its owner.
type SessionAutoContinueExhaustedEvent struct {
	SessionMeta
	MaxContinuations int `json:"maxContinuations"`
}

// AgentAPITaskCreatedEvent records that the agent created a follow-up task through the
// agent API. Besides the seed's ids it carries the task itself, which lives
// in another context: the bridge that creates it there needs nothing else.
type AgentAPITaskCreatedEvent struct {
	SessionMeta
	CreatedTaskID uuid.UUID  `json:"createdTaskId"`
	LinkedTaskID  *uuid.UUID `json:"linkedTaskId,omitempty"`
	Source        string     `json:"source"`
	Title         string     `json:"title"`
	Description   string     `json:"description,omitempty"`
	Priority      string     `json:"priority"`
	Tags          []string   `json:"tags,omitempty"`
}

// EventType returns "session_waiting_for_input".
func (SessionWaitingForInputEvent) EventType() string { return "session_waiting_for_input" }

// EventType returns "session_input_received".
func (SessionInputReceivedEvent) EventType() string { return "session_input_received" }

// EventType returns "session_input_timed_out".
func (SessionInputTimedOutEvent) EventType() string { return "session_input_timed_out" }

// EventType returns "session_plan_created".
func (SessionPlanCreatedEvent) EventType() string { return "session_plan_created" }

// EventType returns "session_plan_pending_approval".
func (SessionPlanPendingApprovalEvent) EventType() string { return "session_plan_pending_approval" }

// EventType returns "session_plan_approved".
func (SessionPlanApprovedEvent) EventType() string { return "session_plan_approved" }

// EventType returns "session_plan_rejected".
func (SessionPlanRejectedEvent) EventType() string { return "session_plan_rejected" }

// EventType returns "session_task_list_updated".
func (SessionTaskListUpdatedEvent) EventType() string { return "session_task_list_updated" }

// EventType returns "session_skill_enabled".
func (SessionSkillEnabledEvent) EventType() string { return "session_skill_enabled" }

// EventType returns "session_skill_disabled".
func (SessionSkillDisabledEvent) EventType() string { return "session_skill_disabled" }

// EventType returns "session_reload_requested".
func (SessionReloadRequestedEvent) EventType() string { return "session_reload_requested" }

// EventType returns "session_reloaded".
func (SessionReloadedEvent) EventType() string { return "session_reloaded" }

// EventType returns "session_metrics_updated".
func (SessionMetricsUpdatedEvent) EventType() string { return "session_metrics_updated" }

// EventType returns "session_budget_warning".
func (SessionBudgetWarningEvent) EventType() string { return "session_budget_warning" }

// EventType returns "session_budget_exhausted".
func (SessionBudgetExhaustedEvent) EventType() string { return "session_budget_exhausted" }

// EventType returns "session_budget_raised".
func (SessionBudgetRaisedEvent) EventType() string { return "session_budget_raised" }

// EventType returns "session_auto_continued".
func (SessionAutoContinuedEvent) EventType() string { return "session_auto_continued" }

// EventType returns "session_auto_continue_exhausted".
func (SessionAutoContinueExhaustedEvent) EventType() string { return "session_auto_continue_exhausted" }

// EventType returns "agent_api_task_created".
func (AgentAPITaskCreatedEvent) EventType() string { return "agent_api_task_created" }
