package command

import (
	"time"

	"github.com/google/uuid"
)

// LogDecision records a decision the agent logs through the agent API in
// its session's log (AgentLogDecisionCommand). It does not change the
// session.
const LogDecision = "log_decision"

// MaxLogDecisionChars bounds a logged decision.
const MaxLogDecisionChars = 2000

// LogDecisionData is the decision, 1-2000 characters.
type LogDecisionData struct {
	Content string `json:"content"`
}

// LogChunkResult is the state of LogDecision: the chunk appended.
type LogChunkResult struct {
	ID         uuid.UUID `json:"id"`
	SessionID  uuid.UUID `json:"sessionId"`
	Kind       string    `json:"kind"`
	Content    string    `json:"content"`
	RecordedAt time.Time `json:"recordedAt"`
}
