package domain

import "slices"

// Operation names an AgentSession method, as it appears in the transition
// table and in TransitionError.
type Operation string

// The operations of an AgentSession. Each is the method of the same name.
const (
	OpGenerateAPIKey             Operation = "GenerateApiKey"
	OpIssueSidecarKey            Operation = "IssueSidecarKey"
	OpStart                      Operation = "Start"
	OpBeginTurn                  Operation = "BeginTurn"
	OpRecordOutput               Operation = "RecordOutput"
	OpRecordTurnCompleted        Operation = "RecordTurnCompleted"
	OpRecordLogChunk             Operation = "RecordLogChunk"
	OpRequestInterrupt           Operation = "RequestInterrupt"
	OpConfirmInterrupted         Operation = "ConfirmInterrupted"
	OpRequestResume              Operation = "RequestResume"
	OpConfirmResumed             Operation = "ConfirmResumed"
	OpRequestCancel              Operation = "RequestCancel"
	OpConfirmCancelled           Operation = "ConfirmCancelled"
	OpRecordContextExhausted     Operation = "RecordContextExhausted"
	OpRecordContextNearingLimit  Operation = "RecordContextNearingLimit"
	OpRecordUserQuestionAsked    Operation = "RecordUserQuestionAsked"
	OpRecordUserQuestionAnswered Operation = "RecordUserQuestionAnswered"
	OpRecordPlanCreated          Operation = "RecordPlanCreated"
	OpRecordPlanPendingApproval  Operation = "RecordPlanPendingApproval"
	OpRecordPlanApproved         Operation = "RecordPlanApproved"
	OpRecordPlanRejected         Operation = "RecordPlanRejected"
	OpUpdateSessionTaskList      Operation = "UpdateSessionTaskList"
	OpEnableSkill                Operation = "EnableSkill"
	OpDisableSkill               Operation = "DisableSkill"
	OpRequestReload              Operation = "RequestReload"
	OpConfirmReloaded            Operation = "ConfirmReloaded"
	OpRecordVoluntaryHandoff     Operation = "RecordVoluntaryHandoff"
	OpApproveOutput              Operation = "ApproveOutput"
	OpRejectOutput               Operation = "RejectOutput"
	OpClose                      Operation = "Close"
	OpRecordFailure              Operation = "RecordFailure"
	OpRetry                      Operation = "Retry"
	OpUpdateMetrics              Operation = "UpdateMetrics"
	OpRaiseBudget                Operation = "RaiseBudget"
	OpAssignToChain              Operation = "AssignToChain"
	OpRequestToolPermission      Operation = "RequestToolPermission"
	OpApproveToolPermission      Operation = "ApproveToolPermission"
	OpDenyToolPermission         Operation = "DenyToolPermission"
	OpExpireQuestion             Operation = "ExpireQuestion"
	OpExpireToolPermission       Operation = "ExpireToolPermission"
	OpRecordAgentMessage         Operation = "RecordAgentMessage"
	OpRecordToolCall             Operation = "RecordToolCall"
	OpRecordToolCallResult       Operation = "RecordToolCallResult"
	OpStartSubAgent              Operation = "StartSubAgent"
	OpCompleteSubAgent           Operation = "CompleteSubAgent"
	OpFailSubAgent               Operation = "FailSubAgent"
	OpRecordAPITaskCreated       Operation = "RecordApiTaskCreated"
	OpRecordAutoContinuation     Operation = "RecordAutoContinuation"
	OpFailHandoff                Operation = "FailHandoff"
	OpStopAutoContinuation       Operation = "StopAutoContinuation"
)

// Case distinguishes the moves one operation can make from one status,
// when the outcome depends on configuration or arguments rather than on
// the status alone. Most transitions have no case ("").
type Case string

// The cases of the transition table.
const (
	CaseNone                = Case("")
	CaseApprovalRequired    = Case("approval required")
	CaseApprovalNotRequired = Case("approval not required")
	CaseHardCapReached      = Case("hard cap reached")
	CaseHardCapSpent        = Case("hard cap spent")
	CaseDefaultAnswer       = Case("default answer")
	CaseNoDefaultAnswer     = Case("no default answer")
	CaseTimeoutDeny         = Case("timeout denies")
	CaseTimeoutAllow        = Case("timeout allows")
	CaseTimeoutFail         = Case("timeout fails")
)

// Transition is one allowed move of the session state machine: calling Op
// in status From (in situation Case) leaves the session in To. To equals
// From for operations that record something without moving.
type Transition struct {
	Op   Operation
	From SessionStatus
	To   SessionStatus
	Case Case
}

type transitionKey struct {
	op   Operation
	from SessionStatus
	c    Case
}

var (
	sessionTransitions []Transition
	transitionIndex    = map[transitionKey]SessionStatus{}
	allowedIndex       = map[SessionStatus]map[Operation]bool{}
)

// Status sets used to build the table.
var (
	stoppingStatuses   = []SessionStatus{StatusInterrupting, StatusPausing, StatusCancelling}
	workingStatuses    = []SessionStatus{StatusRunning, StatusInterrupting, StatusPausing, StatusCancelling}
	cancellableLive    = []SessionStatus{StatusRunning, StatusInterrupted, StatusPaused, StatusWaitingForInput, StatusWaitingForApproval, StatusIdle}
	failableStatuses   = []SessionStatus{StatusRunning, StatusInterrupting, StatusInterrupted, StatusPausing, StatusPaused, StatusResuming, StatusWaitingForInput, StatusWaitingForApproval, StatusIdle}
	budgetRaisable     = except(allSessionStatuses, StatusCompleted, StatusCancelled, StatusContextExhausted)
	afterStartStatuses = except(allSessionStatuses, StatusQueued)
)

func except(set []SessionStatus, drop ...SessionStatus) []SessionStatus {
	var out []SessionStatus
	for _, s := range set {
		if !slices.Contains(drop, s) {
			out = append(out, s)
		}
	}
	return out
}

// move adds the transitions of op from each status of from to to.
func move(op Operation, from []SessionStatus, to SessionStatus, c Case) {
	for _, f := range from {
		sessionTransitions = append(sessionTransitions, Transition{Op: op, From: f, To: to, Case: c})
	}
}

// stay records an operation that does not change the status.
func stay(op Operation, from []SessionStatus, c Case) {
	for _, f := range from {
		sessionTransitions = append(sessionTransitions, Transition{Op: op, From: f, To: f, Case: c})
	}
}

func one(s ...SessionStatus) []SessionStatus { return s }

func init() {
	startTransitions()
	controlTransitions(move)
	waitTransitions()
	endTransitions()
	indexTransitions()
}

// startTransitions are the moves of a session's start and turns.
func startTransitions() {
	live := PoolSlotStatuses()

	// Start and turns.
	stay(OpGenerateAPIKey, one(StatusQueued), CaseNone)
	stay(OpIssueSidecarKey, live, CaseNone)
	move(OpStart, one(StatusQueued), StatusRunning, CaseNone)
	move(OpBeginTurn, one(StatusIdle, StatusInterrupted), StatusRunning, CaseNone)
	move(OpRecordOutput, one(StatusRunning), StatusIdle, CaseNone)
	move(OpRecordTurnCompleted, one(StatusRunning), StatusIdle, CaseNone)
	// The agent's own log: its key is worth nothing once its sidecar is gone.
	stay(OpRecordLogChunk, live, CaseNone)
}

// waitTransitions are the moves of the context window, of what the agent
// waits for (questions, plans, tool permissions), of their timeouts, and
// of skills and configuration reloads.
func waitTransitions() {
	// Context window.
	move(OpRecordContextExhausted, one(StatusRunning), StatusContextExhausted, CaseNone)
	move(OpRecordVoluntaryHandoff, one(StatusRunning), StatusContextExhausted, CaseNone)
	stay(OpRecordContextNearingLimit, one(StatusRunning), CaseNone)
	stay(OpAssignToChain, allSessionStatuses, CaseNone)

	// Questions, plans, task list.
	move(OpRecordUserQuestionAsked, one(StatusRunning), StatusWaitingForInput, CaseNone)
	move(OpRecordUserQuestionAnswered, one(StatusWaitingForInput), StatusRunning, CaseNone)
	stay(OpRecordPlanCreated, workingStatuses, CaseNone)
	move(OpRecordPlanPendingApproval, one(StatusRunning), StatusWaitingForApproval, CaseApprovalRequired)
	stay(OpRecordPlanPendingApproval, one(StatusRunning), CaseApprovalNotRequired)
	move(OpRecordPlanApproved, one(StatusWaitingForApproval), StatusRunning, CaseNone)
	move(OpRecordPlanRejected, one(StatusWaitingForApproval), StatusRunning, CaseNone)
	stay(OpUpdateSessionTaskList, workingStatuses, CaseNone)

	// Tool permissions: a request while the session is being stopped is
	// denied on the spot, whatever the policy says.
	move(OpRequestToolPermission, one(StatusRunning), StatusWaitingForApproval, CaseApprovalRequired)
	stay(OpRequestToolPermission, one(StatusRunning), CaseApprovalNotRequired)
	stay(OpRequestToolPermission, stoppingStatuses, CaseApprovalRequired)
	stay(OpRequestToolPermission, stoppingStatuses, CaseApprovalNotRequired)
	move(OpApproveToolPermission, one(StatusWaitingForApproval), StatusRunning, CaseNone)
	move(OpDenyToolPermission, one(StatusWaitingForApproval), StatusRunning, CaseNone)

	// Timeouts.
	move(OpExpireQuestion, one(StatusWaitingForInput), StatusRunning, CaseDefaultAnswer)
	move(OpExpireQuestion, one(StatusWaitingForInput), StatusFailed, CaseNoDefaultAnswer)
	move(OpExpireToolPermission, one(StatusWaitingForApproval), StatusRunning, CaseTimeoutDeny)
	move(OpExpireToolPermission, one(StatusWaitingForApproval), StatusRunning, CaseTimeoutAllow)
	move(OpExpireToolPermission, one(StatusWaitingForApproval), StatusFailed, CaseTimeoutFail)

	// Skills and configuration reload.
	stay(OpEnableSkill, one(StatusIdle, StatusInterrupted), CaseNone)
	stay(OpDisableSkill, one(StatusIdle, StatusInterrupted), CaseNone)
	stay(OpRequestReload, one(StatusIdle, StatusInterrupted), CaseNone)
	stay(OpConfirmReloaded, PoolSlotStatuses(), CaseNone)
}

// endTransitions are the moves of review, closure, failure and retry, and
// what is recorded in many statuses: spend and the transcript.
func endTransitions() {
	// Review, closure, failure, retry.
	move(OpApproveOutput, one(StatusIdle), StatusCompleted, CaseNone)
	move(OpRejectOutput, one(StatusIdle), StatusFailed, CaseNone)
	move(OpClose, one(StatusIdle), StatusCompleted, CaseNone)
	move(OpRecordFailure, failableStatuses, StatusFailed, CaseNone)
	// A sidecar may die while it stops (it crashed, or kept crashing and
	// its runtime ended the session for it): no stop_ack will come, and
	// its failure is the last word on a session being cancelled.
	move(OpRecordFailure, one(StatusCancelling), StatusFailed, CaseNone)
	move(OpRetry, one(StatusFailed), StatusQueued, CaseNone)
	move(OpFailHandoff, one(StatusContextExhausted), StatusFailed, CaseNone)
	stay(OpRecordAutoContinuation, one(StatusIdle), CaseNone)
	stay(OpStopAutoContinuation, one(StatusIdle), CaseNone)

	// Metrics and budget: spend is a fact and is recorded in every status;
	// reaching the cap pauses a running session.
	stay(OpUpdateMetrics, allSessionStatuses, CaseNone)
	stay(OpUpdateMetrics, except(allSessionStatuses, StatusRunning), CaseHardCapReached)
	move(OpUpdateMetrics, one(StatusRunning), StatusPausing, CaseHardCapReached)
	stay(OpRaiseBudget, budgetRaisable, CaseNone)

	// Transcript: what the sidecar reports after the session started.
	stay(OpRecordAgentMessage, afterStartStatuses, CaseNone)
	stay(OpRecordToolCall, afterStartStatuses, CaseNone)
	stay(OpRecordToolCallResult, afterStartStatuses, CaseNone)
	stay(OpStartSubAgent, afterStartStatuses, CaseNone)
	stay(OpCompleteSubAgent, afterStartStatuses, CaseNone)
	stay(OpFailSubAgent, afterStartStatuses, CaseNone)
	stay(OpRecordAPITaskCreated, one(StatusRunning), CaseNone)
}

// indexTransitions indexes the table, refusing a transition listed twice.
func indexTransitions() {
	for _, t := range sessionTransitions {
		k := transitionKey{t.Op, t.From, t.Case}
		if _, dup := transitionIndex[k]; dup {
			panic("domain: duplicate session transition " + string(t.Op) + " from " + string(t.From))
		}
		transitionIndex[k] = t.To
		if allowedIndex[t.From] == nil {
			allowedIndex[t.From] = map[Operation]bool{}
		}
		allowedIndex[t.From][t.Op] = true
	}
}

// SessionTransitions returns the AgentSession transition table: every
// allowed (operation, status, case) and the status it leads to. The
// session's methods consult this table; anything not in it is refused
// with a TransitionError.
func SessionTransitions() []Transition { return slices.Clone(sessionTransitions) }

// SessionOperations returns every operation of the table, in table order.
func SessionOperations() []Operation {
	var ops []Operation
	for _, t := range sessionTransitions {
		if !slices.Contains(ops, t.Op) {
			ops = append(ops, t.Op)
		}
	}
	return ops
}

// AllowedOperations returns the operations the table allows in status s,
// e.g. for a UI to show only the buttons that can work.
func AllowedOperations(s SessionStatus) []Operation {
	var ops []Operation
	for _, t := range sessionTransitions {
		if t.From == s && !slices.Contains(ops, t.Op) {
			ops = append(ops, t.Op)
		}
	}
	return ops
}

// CanPerform reports whether the table allows op in status s (in some case).
func CanPerform(s SessionStatus, op Operation) bool { return allowedIndex[s][op] }

// NextStatus looks up the table: the status op in case c leads to from
// status from, and whether the table allows that move at all.
func NextStatus(op Operation, from SessionStatus, c Case) (SessionStatus, bool) {
	to, ok := transitionIndex[transitionKey{op, from, c}]
	return to, ok
}
