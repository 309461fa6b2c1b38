package domain

import (
	"regexp"
	"slices"
	"time"
)

// ExecutionMode says how a session was launched. The zero value is invalid.
type ExecutionMode string

// The execution modes.
const (
	ModeStandalone      ExecutionMode = "Standalone"
	ModeParallelBatch   ExecutionMode = "ParallelBatch"
	ModeSequentialQueue ExecutionMode = "SequentialQueue"
)

// IsValid reports whether m is a known mode.
func (m ExecutionMode) IsValid() bool {
	return m == ModeStandalone || m == ModeParallelBatch || m == ModeSequentialQueue
}

// FailureReason classifies why a session failed. The zero value is invalid.
type FailureReason string

// The failure reasons.
const (
	FailureBudgetExhausted     FailureReason = "BudgetExhausted"
	FailureVerificationFailed  FailureReason = "VerificationFailed"
	FailureAgentError          FailureReason = "AgentError"
	FailureManualCancellation  FailureReason = "ManualCancellation"
	FailureTimeout             FailureReason = "Timeout"
	FailureInfrastructureError FailureReason = "InfrastructureError"
)

// IsValid reports whether r is a known reason.
func (r FailureReason) IsValid() bool {
	return slices.Contains([]FailureReason{FailureBudgetExhausted, FailureVerificationFailed,
		FailureAgentError, FailureManualCancellation, FailureTimeout, FailureInfrastructureError}, r)
}

// Failure is why a session is Failed: the reason and an optional message.
type Failure struct {
	Reason  FailureReason `json:"reason"`
	Message string        `json:"message,omitempty"`
}

// SessionOutput is what a session produced at the end of a turn that
// delivered work for review.
type SessionOutput struct {
	OutputLineCount int    `json:"outputLineCount"`
	FilesChanged    int    `json:"filesChanged"`
	TestsAdded      int    `json:"testsAdded"`
	AllTestsPassing bool   `json:"allTestsPassing"`
	CommitSha       string `json:"commitSha,omitempty"`
}

var commitShaPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

// Validate checks counts are not negative and CommitSha, when set, is a
// full 40-character lowercase git SHA (so the merge that follows approval
// names exactly one commit).
func (o SessionOutput) Validate() error {
	switch {
	case o.OutputLineCount < 0:
		return invalid("outputLineCount", "must not be negative")
	case o.FilesChanged < 0:
		return invalid("filesChanged", "must not be negative")
	case o.TestsAdded < 0:
		return invalid("testsAdded", "must not be negative")
	case o.CommitSha != "" && !commitShaPattern.MatchString(o.CommitSha):
		return invalid("commitSha", "must be a 40-character hexadecimal git SHA")
	}
	return nil
}

// SessionLogChunk is one piece of streamed output, kept for replay.
type SessionLogChunk struct {
	SequenceNumber int64     `json:"sequenceNumber"`
	Content        string    `json:"content"`
	RecordedAt     time.Time `json:"recordedAt"`
}

// Validate checks the content is not empty and the sequence not negative.
func (c SessionLogChunk) Validate() error {
	if c.Content == "" {
		return invalid("content", "must not be empty")
	}
	if c.SequenceNumber < 0 {
		return invalid("sequenceNumber", "must not be negative")
	}
	return nil
}

// UserQuestion is the question a session waits on in WaitingForInput.
type UserQuestion struct {
	Content   string    `json:"content"`
	Options   []string  `json:"options,omitempty"`
	AskedAt   time.Time `json:"askedAt"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// SessionTaskStatus is the state of one entry of the agent's task list.
type SessionTaskStatus string

// The task statuses.
const (
	TaskPending    SessionTaskStatus = "Pending"
	TaskInProgress SessionTaskStatus = "InProgress"
	TaskCompleted  SessionTaskStatus = "Completed"
)

// SessionTask is one entry of the agent's own task breakdown.
type SessionTask struct {
	ID         string            `json:"id"`
	Subject    string            `json:"subject"`
	Status     SessionTaskStatus `json:"status"`
	ActiveForm string            `json:"activeForm,omitempty"`
	UpdatedAt  time.Time         `json:"updatedAt"`
}

// SessionTaskList is the latest snapshot of the agent's task list. Each
// update replaces it; lists are never merged.
type SessionTaskList struct {
	Tasks         []SessionTask `json:"tasks"`
	LastUpdatedAt time.Time     `json:"lastUpdatedAt"`
}

// CompletedCount counts the tasks marked Completed.
func (l SessionTaskList) CompletedCount() int {
	n := 0
	for _, t := range l.Tasks {
		if t.Status == TaskCompleted {
			n++
		}
	}
	return n
}

func validateTasks(tasks []SessionTask) error {
	seen := map[string]bool{}
	for _, t := range tasks {
		if t.ID == "" {
			return invalid("tasks.id", "must not be empty")
		}
		if seen[t.ID] {
			return invalid("tasks.id", "task id %q appears twice", t.ID)
		}
		seen[t.ID] = true
		if _, err := requireText("tasks.subject", t.Subject, 1, 0); err != nil {
			return err
		}
		if t.Status != TaskPending && t.Status != TaskInProgress && t.Status != TaskCompleted {
			return invalid("tasks.status", "unknown task status %q", t.Status)
		}
	}
	return nil
}

// PlanStatus is the state of the session's plan document.
type PlanStatus string

// The plan statuses.
const (
	PlanDraft           PlanStatus = "Draft"
	PlanPendingApproval PlanStatus = "PendingApproval"
	PlanApproved        PlanStatus = "Approved"
	PlanRejected        PlanStatus = "Rejected"
)

// MaxPlanChars bounds a plan document.
const MaxPlanChars = 10000

// SessionPlan is the plan the agent wrote in plan mode. A revision
// replaces Content; Version counts submissions for approval.
type SessionPlan struct {
	Content          string     `json:"content"`
	Status           PlanStatus `json:"status"`
	RequiresApproval bool       `json:"requiresApproval"`
	CreatedAt        time.Time  `json:"createdAt"`
	ApprovedAt       *time.Time `json:"approvedAt,omitempty"`
	Version          int        `json:"version"`
	// Submitted records whether the plan was ever submitted for approval,
	// so that only later submissions increment Version.
	Submitted bool `json:"submitted"`
	// Feedback is the user's reason for the last rejection.
	Feedback string `json:"feedback,omitempty"`
}

// ValidationType is what an auto-continue criterion checks.
type ValidationType string

// The validation types.
const (
	ValidationTestsPassing      ValidationType = "TestsPassing"
	ValidationCoverageThreshold ValidationType = "CoverageThreshold"
	ValidationCustomCommand     ValidationType = "CustomCommand"
	ValidationLintPassing       ValidationType = "LintPassing"
)

// ValidationCriterion is one check run after a turn when auto-continue is on.
type ValidationCriterion struct {
	Type          ValidationType `json:"type"`
	Threshold     *float64       `json:"threshold,omitempty"`
	CustomCommand string         `json:"customCommand,omitempty"`
}

// DefaultMaxContinuations is how many times a session auto-continues
// before a person must step in.
const DefaultMaxContinuations = 5

// AutoContinueConfig drives the validate-and-continue loop: after a turn
// the application runs the criteria and, while one fails and the count is
// below MaxContinuations, enqueues a "continue" message.
type AutoContinueConfig struct {
	ValidationCriteria       []ValidationCriterion `json:"validationCriteria"`
	MaxContinuations         int                   `json:"maxContinuations"`
	CurrentContinuationCount int                   `json:"currentContinuationCount"`
	IsEnabled                bool                  `json:"isEnabled"`
}

// Validate checks the limits and each criterion.
func (c AutoContinueConfig) Validate() error {
	if c.MaxContinuations < 1 {
		return invalid("autoContinue.maxContinuations", "must be at least 1")
	}
	if c.CurrentContinuationCount < 0 {
		return invalid("autoContinue.currentContinuationCount", "must not be negative")
	}
	for _, v := range c.ValidationCriteria {
		switch v.Type {
		case ValidationTestsPassing, ValidationLintPassing:
		case ValidationCoverageThreshold:
			if v.Threshold == nil || *v.Threshold < 0 || *v.Threshold > 100 {
				return invalid("autoContinue.validationCriteria.threshold", "coverage threshold must be 0-100")
			}
		case ValidationCustomCommand:
			if v.CustomCommand == "" {
				return invalid("autoContinue.validationCriteria.customCommand", "must not be empty")
			}
		default:
			return invalid("autoContinue.validationCriteria.type", "unknown validation type %q", v.Type)
		}
	}
	return nil
}

func cloneAutoContinue(c *AutoContinueConfig) *AutoContinueConfig {
	if c == nil {
		return nil
	}
	v := *c
	v.ValidationCriteria = slices.Clone(c.ValidationCriteria)
	return &v
}
