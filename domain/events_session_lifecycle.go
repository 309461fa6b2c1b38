package domain

import (
	"time"

	"github.com/google/uuid"
)

// AgentSessionCreatedEvent records that a session was created and is Queued.
type AgentSessionCreatedEvent struct {
	SessionMeta
	Name             string     `json:"name"`
	WorkingDirectory string     `json:"workingDirectory"`
	Objective        string     `json:"objective"`
	ModelID          string     `json:"modelId"`
	TemplateID       *uuid.UUID `json:"templateId,omitempty"`
	ChainID          *uuid.UUID `json:"chainId,omitempty"`
	BudgetCapUsd     USD        `json:"budgetCapUsd"`
}

// AgentSessionStartedEvent records the move Queued -> Running; the sidecar may be launched.
type AgentSessionStartedEvent struct {
	SessionMeta
	WorkingDirectory string        `json:"workingDirectory"`
	Objective        string        `json:"objective"`
	ModelID          string        `json:"modelId"`
	EnabledSkillIDs  []uuid.UUID   `json:"enabledSkillIds"`
	ExecutionMode    ExecutionMode `json:"executionMode"`
	RetryCount       int           `json:"retryCount"`
}

// AgentSessionTurnBegunEvent records the move Idle or Interrupted -> Running because a
// follow-up message started the next turn.
type AgentSessionTurnBegunEvent struct {
	SessionMeta
	From SessionStatus `json:"from"`
}

// AgentSessionTurnCompletedEvent records that a turn ended without final output (Running -> Idle).
type AgentSessionTurnCompletedEvent struct {
	SessionMeta
	TurnCount  int       `json:"turnCount"`
	LastTurnAt time.Time `json:"lastTurnAt"`
}

// AgentSessionOutputReadyEvent records that a turn delivered output for review (Running -> Idle).
type AgentSessionOutputReadyEvent struct {
	SessionMeta
	FilesChanged    int    `json:"filesChanged"`
	TestsAdded      int    `json:"testsAdded"`
	AllTestsPassing bool   `json:"allTestsPassing"`
	CommitSha       string `json:"commitSha,omitempty"`
	TurnCount       int    `json:"turnCount"`
}

// SessionInterruptRequestedEvent records the move Running -> Interrupting; send `interrupt`.
type SessionInterruptRequestedEvent struct {
	SessionMeta
	// CommandID is the id of the `interrupt` sent to the sidecar; its ack echoes it.
	CommandID uuid.UUID `json:"commandId"`
}

// SessionInterruptedEvent records the move Interrupting -> Interrupted (interrupt_ack).
type SessionInterruptedEvent struct{ SessionMeta }

// SessionResumeRequestedEvent records the move Paused -> Resuming; send `resume`.
type SessionResumeRequestedEvent struct {
	SessionMeta
	// CommandID is the id of the `resume` sent to the sidecar; its ack echoes it.
	CommandID uuid.UUID `json:"commandId"`
}

// SessionResumedEvent records the move Resuming -> Running (resume_ack).
type SessionResumedEvent struct{ SessionMeta }

// SessionCancelRequestedEvent records the move to Cancelling; send `stop`.
type SessionCancelRequestedEvent struct {
	SessionMeta
	// CommandID is the id of the `stop` sent to the sidecar; its ack echoes it.
	CommandID uuid.UUID `json:"commandId"`
	// Force stops the agent at once, without letting its running tool finish.
	Force bool `json:"force,omitempty"`
}

// SessionCancelledEvent records the move to Cancelled (stop_ack, or directly for a Queued
// session that never had a sidecar).
type SessionCancelledEvent struct {
	SessionMeta
	// Direct is true when no sidecar had to be stopped.
	Direct bool `json:"direct"`
}

// AgentSessionApprovedEvent records that the owner approved the output (Idle -> Completed).
type AgentSessionApprovedEvent struct {
	SessionMeta
	CommitSha string `json:"commitSha,omitempty"`
}

// AgentSessionClosedEvent records that the owner closed a session without output (Idle -> Completed).
type AgentSessionClosedEvent struct{ SessionMeta }

// AgentSessionRejectedEvent records that the owner rejected the output (Idle -> Failed).
type AgentSessionRejectedEvent struct {
	SessionMeta
	Reason string `json:"reason,omitempty"`
}

// AgentSessionFailedEvent records that the session failed.
type AgentSessionFailedEvent struct {
	SessionMeta
	FailureReason FailureReason `json:"failureReason"`
	Message       string        `json:"message,omitempty"`
}

// AgentSessionRetriedEvent records the move Failed -> Queued.
type AgentSessionRetriedEvent struct {
	SessionMeta
	RetryCount            int    `json:"retryCount"`
	AdditionalInstruction string `json:"additionalInstruction,omitempty"`
}

// ContextNearingLimitEvent records that the context window crossed the warning threshold.
type ContextNearingLimitEvent struct {
	SessionMeta
	UsagePercent      float64 `json:"usagePercent"`
	ModelContextLimit int64   `json:"modelContextLimit"`
}

// ContextExhaustedEvent records the move Running -> ContextExhausted; start the handoff.
type ContextExhaustedEvent struct {
	SessionMeta
	ChainID *uuid.UUID `json:"chainId,omitempty"`
}

// SessionVoluntaryHandoffEvent records that the agent handed off on its own
// (Running -> ContextExhausted). It carries the handoff content so the
// reaction can create the chain's handoff document.
type SessionVoluntaryHandoffEvent struct {
	SessionMeta
	Reason        string     `json:"reason"`
	Summary       string     `json:"summary"`
	RemainingWork string     `json:"remainingWork"`
	ChainID       *uuid.UUID `json:"chainId,omitempty"`
}

// SessionChainAssignedEvent records that the session was linked to a chain.
type SessionChainAssignedEvent struct {
	SessionMeta
	ChainID uuid.UUID `json:"chainId"`
}

// EventType returns "agent_session_created".
func (AgentSessionCreatedEvent) EventType() string { return "agent_session_created" }

// EventType returns "agent_session_started".
func (AgentSessionStartedEvent) EventType() string { return "agent_session_started" }

// EventType returns "agent_session_turn_begun".
func (AgentSessionTurnBegunEvent) EventType() string { return "agent_session_turn_begun" }

// EventType returns "agent_session_turn_completed".
func (AgentSessionTurnCompletedEvent) EventType() string { return "agent_session_turn_completed" }

// EventType returns "agent_session_output_ready".
func (AgentSessionOutputReadyEvent) EventType() string { return "agent_session_output_ready" }

// EventType returns "session_interrupt_requested".
func (SessionInterruptRequestedEvent) EventType() string { return "session_interrupt_requested" }

// EventType returns "session_interrupted".
func (SessionInterruptedEvent) EventType() string { return "session_interrupted" }

// EventType returns "session_resume_requested".
func (SessionResumeRequestedEvent) EventType() string { return "session_resume_requested" }

// EventType returns "session_resumed".
func (SessionResumedEvent) EventType() string { return "session_resumed" }

// EventType returns "session_cancel_requested".
func (SessionCancelRequestedEvent) EventType() string { return "session_cancel_requested" }

// EventType returns "session_cancelled".
func (SessionCancelledEvent) EventType() string { return "session_cancelled" }

// EventType returns "agent_session_approved".
func (AgentSessionApprovedEvent) EventType() string { return "agent_session_approved" }

// EventType returns "agent_session_closed".
func (AgentSessionClosedEvent) EventType() string { return "agent_session_closed" }

// EventType returns "agent_session_rejected".
func (AgentSessionRejectedEvent) EventType() string { return "agent_session_rejected" }

// EventType returns "agent_session_failed".
func (AgentSessionFailedEvent) EventType() string { return "agent_session_failed" }

// EventType returns "agent_session_retried".
func (AgentSessionRetriedEvent) EventType() string { return "agent_session_retried" }

// EventType returns "context_nearing_limit".
func (ContextNearingLimitEvent) EventType() string { return "context_nearing_limit" }

// EventType returns "context_exhausted".
func (ContextExhaustedEvent) EventType() string { return "context_exhausted" }

// EventType returns "session_voluntary_handoff".
func (SessionVoluntaryHandoffEvent) EventType() string { return "session_voluntary_handoff" }

// EventType returns "session_chain_assigned".
func (SessionChainAssignedEvent) EventType() string { return "session_chain_assigned" }
