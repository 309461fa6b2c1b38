package queries

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/domain"
)

// Outcome is how a session's run ended, for the history.
type Outcome string

// The outcomes.
const (
	// OutcomeInProgress: the session has not ended.
	OutcomeInProgress Outcome = "InProgress"
	// OutcomeApproved: its output was approved (Completed with output).
	OutcomeApproved Outcome = "Approved"
	// OutcomeClosed: it was closed without output to review (Completed).
	OutcomeClosed Outcome = "Closed"
	// OutcomeRejected: its output was rejected (Failed, VerificationFailed).
	OutcomeRejected Outcome = "Rejected"
	// OutcomeFailed: it failed for another reason.
	OutcomeFailed Outcome = "Failed"
	// OutcomeCancelled: it was cancelled.
	OutcomeCancelled Outcome = "Cancelled"
	// OutcomeContextExhausted: its context window filled; the work went on
	// in the next session of its chain.
	OutcomeContextExhausted Outcome = "ContextExhausted"
)

// AllOutcomes lists every outcome.
func AllOutcomes() []Outcome {
	return []Outcome{OutcomeInProgress, OutcomeApproved, OutcomeClosed, OutcomeRejected,
		OutcomeFailed, OutcomeCancelled, OutcomeContextExhausted}
}

// OutcomeOf derives the outcome from a session's state.
func OutcomeOf(snap domain.AgentSessionSnapshot) Outcome {
	switch snap.Status {
	case domain.StatusCompleted:
		// Close is refused while output awaits review, so a Completed
		// session with output is one whose output was approved.
		if snap.Output != nil {
			return OutcomeApproved
		}
		return OutcomeClosed
	case domain.StatusFailed:
		if snap.Failure != nil && snap.Failure.Reason == domain.FailureVerificationFailed {
			return OutcomeRejected
		}
		return OutcomeFailed
	case domain.StatusCancelled:
		return OutcomeCancelled
	case domain.StatusContextExhausted:
		return OutcomeContextExhausted
	}
	return OutcomeInProgress
}

// HistoryItem is one row of the session history (AgentSessionHistoryDto).
type HistoryItem struct {
	ID           uuid.UUID
	Name         string
	Status       domain.SessionStatus
	TotalCostUsd domain.USD
	// Duration is how long the session ran (see SessionSummary.Elapsed).
	Duration    time.Duration
	Outcome     Outcome
	Failure     *domain.Failure
	CreatedAt   time.Time
	StartedAt   *time.Time
	CompletedAt *time.Time
}

// HistoryParams selects the sessions of History.
type HistoryParams struct {
	// Owner is whose sessions to list.
	Owner uuid.UUID
	// From, when set, keeps the sessions created at or after it.
	From time.Time
	// To, when set, keeps the sessions created before it.
	To time.Time
	Paging
}

// History returns one page of the owner's sessions created in the date
// range, newest first, with their cost, duration and outcome
// (GetSessionHistoryQuery).
func (s *Store) History(ctx context.Context, p HistoryParams) (Page[HistoryItem], error) {
	if !p.From.IsZero() && !p.To.IsZero() && !p.From.Before(p.To) {
		return Page[HistoryItem]{}, &domain.ValidationError{FieldName: "from", Message: "must be before to"}
	}
	where, args := "owner_id = $1", []any{p.Owner}
	if !p.From.IsZero() {
		args = append(args, p.From)
		where += fmt.Sprintf(" AND created_at >= $%d", len(args))
	}
	if !p.To.IsZero() {
		args = append(args, p.To)
		where += fmt.Sprintf(" AND created_at < $%d", len(args))
	}
	now := s.now()
	return listPage(ctx, s.db, where, args, p.Paging, func(snap domain.AgentSessionSnapshot) HistoryItem {
		return HistoryItem{
			ID: snap.ID, Name: snap.Name, Status: snap.Status, TotalCostUsd: snap.Metrics.TotalCostUsd,
			Duration: elapsed(snap, now), Outcome: OutcomeOf(snap), Failure: snap.Failure,
			CreatedAt: snap.CreatedAt, StartedAt: snap.StartedAt, CompletedAt: snap.CompletedAt,
		}
	})
}
