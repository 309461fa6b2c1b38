package command

import (
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/domain"
)

// The commands of the agent API (seed 001 §8.7): a running agent sends
// them, through the API, with its session's key. The API sends them with
// the owner of that session, so the handlers scope them like a person's.
const (
	// CreateAgentTask records a follow-up task the agent of the session
	// (the aggregateId) creates; it raises AgentApiTaskCreatedEvent for
	// the task context, which creates the task under the returned id.
	CreateAgentTask = "create_agent_task"
	// HandOff is the voluntary handoff of the session (the aggregateId)
	// with its handoff document: the session stops (Running ->
	// ContextExhausted) and its chain, created if it has none, receives
	// the document, in one transaction; the handoff reaction then starts
	// the continuation session.
	HandOff = "hand_off"
	// RecordAgentMemoryPill is RecordMemoryPill as an agent sends it, on
	// the skill (the aggregateId): the skill must be enabled on the
	// agent's session and the session Running.
	RecordAgentMemoryPill = "record_agent_memory_pill"
)

// The priorities of an agent's follow-up task.
const (
	TaskPriorityLow    = "Low"
	TaskPriorityMedium = "Medium"
	TaskPriorityHigh   = "High"
	TaskPriorityUrgent = "Urgent"
)

// Bounds of an agent's follow-up task.
const (
	MaxTaskTitleChars       = 200
	MaxTaskDescriptionChars = 4000
	MaxTaskTags             = 10
	MaxTaskTagChars         = 50
)

// AgentTaskData is the follow-up task an agent creates.
type AgentTaskData struct {
	Title       string   `json:"title"`
	Description string   `json:"description,omitempty"`
	Priority    string   `json:"priority"`
	Tags        []string `json:"tags,omitempty"`
	// LinkedTaskID is the task the new one follows up on, if any.
	LinkedTaskID *uuid.UUID `json:"linkedTaskId,omitempty"`
}

// AgentTaskResult is the state of CreateAgentTask: the new task's id
// (derived from the command id, so a repeat names the same task) and the
// task as recorded.
type AgentTaskResult struct {
	TaskID    uuid.UUID     `json:"taskId"`
	SessionID uuid.UUID     `json:"sessionId"`
	Task      AgentTaskData `json:"task"`
}

// HandOffData is the reason of a voluntary handoff and its document.
type HandOffData struct {
	Reason        string `json:"reason"`
	Summary       string `json:"summary"`
	RemainingWork string `json:"remainingWork"`
	KeyDecisions  string `json:"keyDecisions,omitempty"`
}

// HandOffResult is the state of HandOff: the stopped session and the
// handoff document its chain received.
type HandOffResult struct {
	Session         domain.AgentSessionSnapshot `json:"session"`
	HandoffDocument domain.HandoffDocument      `json:"handoffDocument"`
}
