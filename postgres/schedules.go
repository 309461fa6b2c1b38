package postgres

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// MarkScheduleHandled records that every due time of the template up to
// and including through is handled. It never moves the mark back, so
// copies of the scheduler may record in any order.
func MarkScheduleHandled(ctx context.Context, db Execer, template uuid.UUID, through time.Time) error {
	_, err := db.Exec(ctx, `INSERT INTO schedule_runs (template_id, handled_through) VALUES ($1, $2)
ON CONFLICT (template_id) DO UPDATE SET handled_through = GREATEST(schedule_runs.handled_through, EXCLUDED.handled_through)`,
		template, through)
	return err
}
