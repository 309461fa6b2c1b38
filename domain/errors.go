package domain

import (
	"errors"
	"fmt"
)

// Error kinds: the one list of them. Every error of this package has one
// of the first three; command results and the api's own errors may carry
// any. The api maps each kind to one HTTP status, the command handlers to
// one result; command and api name these values, they do not redefine them.
const (
	// KindValidation is input that breaks a value rule (422).
	KindValidation = "validation"
	// KindConflict is an operation the aggregate's current state forbids (409).
	KindConflict = "conflict"
	// KindNotFound is an entity missing from its aggregate, or one that
	// is not the caller's (404).
	KindNotFound = "not_found"
	// KindUnauthorized is a missing or invalid credential (401).
	KindUnauthorized = "unauthorized"
	// KindForbidden is a valid credential that may not touch the resource (403).
	KindForbidden = "forbidden"
	// KindRateLimited is a caller over its rate (429).
	KindRateLimited = "rate_limited"
	// KindInternal is anything else (500).
	KindInternal = "internal"
)

// Sentinel errors. Test for them with errors.Is; the typed errors below
// wrap or match them.
var (
	// ErrValidation matches every *ValidationError.
	ErrValidation = errors.New("invalid value")
	// ErrConflict matches every error of kind conflict.
	ErrConflict = errors.New("conflict")
	// ErrNotFound matches every *NotFoundError.
	ErrNotFound = errors.New("not found")

	// ErrInvalidTransition is the reason of a TransitionError when the
	// current status does not allow the operation at all.
	ErrInvalidTransition = errors.New("operation not allowed in the current status")
	// ErrBudgetExhausted: the session's hard cap is spent, so it may not
	// run again until the owner raises the cap.
	ErrBudgetExhausted = errors.New("budget hard cap is spent")
	// ErrNoPendingReview: ApproveOutput and RejectOutput need output awaiting review.
	ErrNoPendingReview = errors.New("no output is awaiting review")
	// ErrPendingReview: Close is for sessions without output awaiting review.
	ErrPendingReview = errors.New("output is awaiting review; approve or reject it")
	// ErrMaxRetriesReached: Retry was called MaxRetries times already.
	ErrMaxRetriesReached = errors.New("maximum number of retries reached")
	// ErrEngineMismatch: a session's agent runs on the engine it started
	// on; a runtime of another engine may not run it.
	ErrEngineMismatch = errors.New("the session's agent runs on another engine")
	// ErrNoAPIKey: a session must have an API key before it starts.
	ErrNoAPIKey = errors.New("no API key was generated")
	// ErrNoPlanPendingApproval: the session waits for something other than a plan decision.
	ErrNoPlanPendingApproval = errors.New("no plan is pending approval")
	// ErrNoPendingPermission: no tool permission request with that id is pending.
	ErrNoPendingPermission = errors.New("no such tool permission request is pending")
	// ErrNoTimeoutDue: nothing the session waits for has expired yet.
	ErrNoTimeoutDue = errors.New("no timeout is due")
	// ErrNoReloadPending: ConfirmReloaded without a RequestReload.
	ErrNoReloadPending = errors.New("no configuration reload is pending")
	// ErrUnexpectedAck: a sidecar ack whose command id is not the awaited
	// command's (never sent, or superseded).
	ErrUnexpectedAck = errors.New("the acknowledgement does not match the command awaiting one")
	// ErrSkillAlreadyEnabled: EnableSkill of an enabled skill.
	ErrSkillAlreadyEnabled = errors.New("skill is already enabled")
	// ErrSkillNotEnabled: DisableSkill of a skill that is not enabled.
	ErrSkillNotEnabled = errors.New("skill is not enabled")
	// ErrSkillInactive: deactivated skills cannot be enabled on sessions.
	ErrSkillInactive = errors.New("skill is deactivated")
	// ErrTemplateInactive: deactivated templates cannot create sessions.
	ErrTemplateInactive = errors.New("template is deactivated")
	// ErrAutoContinueLimit: the auto-continue loop reached MaxContinuations or is disabled.
	ErrAutoContinueLimit = errors.New("auto-continue is disabled or reached its limit")
	// ErrAutoContinueNotSpent: the auto-continue loop is off or has
	// continuations left, so there is nothing to stop.
	ErrAutoContinueNotSpent = errors.New("auto-continue is off or has continuations left")
	// ErrAlreadyInChain: a session belongs to one chain only.
	ErrAlreadyInChain = errors.New("session already belongs to another chain")
	// ErrDuplicate: an id or a name that must be unique is used twice.
	ErrDuplicate = errors.New("already exists")
	// ErrChainLimitReached: a chain holds as many sessions as it may.
	ErrChainLimitReached = errors.New("the chain holds as many sessions as it may")
	// ErrHandoffPending: a chain has a handoff waiting for its next session.
	ErrHandoffPending = errors.New("a handoff is already waiting for the next session")
	// ErrNotCurrentSession: handoffs start from the chain's current session only.
	ErrNotCurrentSession = errors.New("session is not the chain's current session")
	// ErrPoolExhausted matches every *PoolExhaustedError.
	ErrPoolExhausted = errors.New("session pool is at capacity")
	// ErrOwnerMismatch: an aggregate of another owner was passed in.
	ErrOwnerMismatch = errors.New("belongs to another owner")
)

// ValidationError reports a value that breaks a rule, naming the field.
type ValidationError struct {
	// FieldName is the lowerCamelCase name of the offending field
	// (objective, budget.hardCapUsd).
	FieldName string
	// Message says what is wrong, for people.
	Message string
}

func invalid(field, format string, args ...any) *ValidationError {
	return &ValidationError{FieldName: field, Message: fmt.Sprintf(format, args...)}
}

// Error returns "field: message".
func (e *ValidationError) Error() string { return e.FieldName + ": " + e.Message }

// Kind returns KindValidation.
func (e *ValidationError) Kind() string { return KindValidation }

// Field returns the offending field, so the api can point at it.
func (e *ValidationError) Field() string { return e.FieldName }

// Is reports whether target is ErrValidation.
func (e *ValidationError) Is(target error) bool { return target == ErrValidation }

// TransitionError reports an operation that the current status (or a rule
// that depends on the state) forbids. It says what was attempted, on what,
// and in which status, so a caller can show it as is.
type TransitionError struct {
	// Aggregate is the kind of object (AgentSession, SessionMessage, SessionChain).
	Aggregate string
	// Operation is the method that was called (RequestPause).
	Operation string
	// Status is the status the object was in.
	Status string
	// Reason is ErrInvalidTransition or a more specific sentinel
	// (ErrBudgetExhausted, ErrNoPendingReview, ...).
	Reason error
}

// Error returns e.g. "cannot RequestPause: AgentSession is Paused: operation
// not allowed in the current status".
func (e *TransitionError) Error() string {
	return fmt.Sprintf("cannot %s: %s is %s: %v", e.Operation, e.Aggregate, e.Status, e.Reason)
}

// Unwrap returns the reason, so errors.Is(err, ErrBudgetExhausted) works.
func (e *TransitionError) Unwrap() error { return e.Reason }

// Is reports whether target is ErrConflict.
func (e *TransitionError) Is(target error) bool { return target == ErrConflict }

// Kind returns KindConflict.
func (e *TransitionError) Kind() string { return KindConflict }

// CurrentStatus returns the status the object was in.
func (e *TransitionError) CurrentStatus() string { return e.Status }

// NotFoundError reports an entity missing from its aggregate (a message
// id not in the queue, a pill not in the skill).
type NotFoundError struct {
	// Entity is the kind of thing looked for (SessionMessage, MemoryPill).
	Entity string
	// ID is the identifier or name looked for.
	ID string
}

// Error returns "SessionMessage 1234 not found".
func (e *NotFoundError) Error() string { return e.Entity + " " + e.ID + " not found" }

// Kind returns KindNotFound.
func (e *NotFoundError) Kind() string { return KindNotFound }

// Is reports whether target is ErrNotFound.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// PoolExhaustedError is returned by SessionPool.Allocate when the owner's
// pool is full; the session stays Queued.
type PoolExhaustedError struct {
	// ActiveCount is the number of sessions holding a slot.
	ActiveCount int
	// MaxCount is the pool's capacity.
	MaxCount int
	// Event is the SessionPoolExhaustedEvent also raised on the session,
	// for a caller that rolls the session's transaction back on error and
	// still wants the owner told.
	Event SessionPoolExhaustedEvent
}

// Error says how full the pool is.
func (e *PoolExhaustedError) Error() string {
	return fmt.Sprintf("session pool is at capacity (%d of %d slots in use); the session stays Queued", e.ActiveCount, e.MaxCount)
}

// Is matches ErrPoolExhausted and ErrConflict.
func (e *PoolExhaustedError) Is(target error) bool {
	return target == ErrPoolExhausted || target == ErrConflict
}

// Kind returns KindConflict.
func (e *PoolExhaustedError) Kind() string { return KindConflict }

// CurrentStatus returns Queued: the session did not move.
func (e *PoolExhaustedError) CurrentStatus() string { return string(StatusQueued) }
