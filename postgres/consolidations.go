package postgres

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Consolidation is the skill and the memory pills a consolidation session
// folds in.
type Consolidation struct {
	SessionID uuid.UUID
	SkillID   uuid.UUID
	PillIDs   []uuid.UUID
}

// AddConsolidation records, in the transaction that creates the session,
// that it is a consolidation session.
func AddConsolidation(ctx context.Context, tx pgx.Tx, c Consolidation) error {
	_, err := tx.Exec(ctx, "INSERT INTO skill_consolidations (session_id, skill_id, pill_ids) VALUES ($1, $2, $3)",
		c.SessionID, c.SkillID, c.PillIDs)
	return err
}

// ConsolidationOf returns what the session consolidates, and false when it
// is not a consolidation session.
func ConsolidationOf(ctx context.Context, q Querier, sessionID uuid.UUID) (Consolidation, bool, error) {
	c := Consolidation{SessionID: sessionID}
	err := q.QueryRow(ctx, "SELECT skill_id, pill_ids FROM skill_consolidations WHERE session_id = $1", sessionID).
		Scan(&c.SkillID, &c.PillIDs)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, false, nil
	}
	return c, err == nil, err
}
