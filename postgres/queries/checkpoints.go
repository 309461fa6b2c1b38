package queries

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// Checkpoint is the state of a session at the end of one of its turns, as
// its sidecar reported it (the checkpoint of a turn_completed).
type Checkpoint struct {
	protocol.Checkpoint
	// SessionID is the session.
	SessionID uuid.UUID
	// RecordedAt is when the turn ended.
	RecordedAt time.Time
	// LastMessage is the agent's last text message of the turn, "" when
	// it wrote none.
	LastMessage string
	// Rewound is true when the session was later rewound to an earlier
	// turn (or forked and resumed before it): what the checkpoint holds
	// is no longer on the session's line.
	Rewound bool
	// Pruned (not the report's list, Checkpoint.Pruned) is true when a
	// later checkpoint's report says the retention
	// policy dropped this one from the store: it can no longer be forked
	// or rewound to.
	Pruned bool
	// Cursor is the activity cursor of the turn's end.
	Cursor int64
}

// Checkpoints returns the session's checkpoints, oldest first; a
// *NotFoundError when the session is not the owner's.
func (s *Store) Checkpoints(ctx context.Context, owner, id uuid.UUID) ([]Checkpoint, error) {
	if err := s.ownSession(ctx, owner, id); err != nil {
		return nil, err
	}
	return SessionCheckpoints(ctx, s.db, id)
}

// CheckpointAt returns the session's newest checkpoint of turn, a
// *NotFoundError when the session is not the owner's or has none.
func (s *Store) CheckpointAt(ctx context.Context, owner, id uuid.UUID, turn int) (Checkpoint, error) {
	all, err := s.Checkpoints(ctx, owner, id)
	if err != nil {
		return Checkpoint{}, err
	}
	return pickCheckpoint(all, id, turn)
}

// SessionCheckpointAt is CheckpointAt for the runtime, which acts for
// every owner.
func SessionCheckpointAt(ctx context.Context, db DB, id uuid.UUID, turn int) (Checkpoint, error) {
	all, err := SessionCheckpoints(ctx, db, id)
	if err != nil {
		return Checkpoint{}, err
	}
	return pickCheckpoint(all, id, turn)
}

func pickCheckpoint(all []Checkpoint, id uuid.UUID, turn int) (Checkpoint, error) {
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Turn == turn {
			return all[i], nil
		}
	}
	return Checkpoint{}, &NotFoundError{Entity: "checkpoint", ID: fmt.Sprintf("%s turn %d", id, turn)}
}

// Rewound reports whether the activity item at cursor came after a
// checkpoint the session was later rewound to, and before the rewind:
// what it records is no longer on the session's line.
func Rewound(cps []Checkpoint, cursor int64) bool {
	for j, c := range cps {
		// A checkpoint whose turn an earlier one reached is a rewind's
		// restored state; the rewind went back to the newest earlier
		// checkpoint of that turn.
		for i := j - 1; i >= 0; i-- {
			if cps[i].Turn == c.Turn {
				if cursor > cps[i].Cursor && cursor < c.Cursor {
					return true
				}
				break
			}
		}
	}
	return false
}

// SessionCheckpoints returns the checkpoints the session's sidecars
// reported, oldest first, read from its activity (each turn_completed
// item carries its raw data).
func SessionCheckpoints(ctx context.Context, db DB, id uuid.UUID) ([]Checkpoint, error) {
	rows, err := db.Query(ctx, `
SELECT t.source_seq, t.occurred_at, t.detail,
       COALESCE((SELECT m.detail FROM activity_items m
                  WHERE m.session_id = t.session_id AND m.source_seq < t.source_seq
                    AND m.raw_type = 'assistant_message' AND m.type = $2
                    AND m.source_seq > COALESCE((SELECT max(p.source_seq) FROM activity_items p
                                                  WHERE p.session_id = t.session_id AND p.source_seq < t.source_seq
                                                    AND p.raw_type = 'turn_completed'), 0)
                  ORDER BY m.source_seq DESC LIMIT 1), '')
  FROM activity_items t
 WHERE t.session_id = $1 AND t.raw_type = 'turn_completed' AND t.detail LIKE '%"checkpoint"%'
 ORDER BY t.source_seq`, id, string(domain.ActivityMessage))
	if err != nil {
		return nil, fmt.Errorf("queries: checkpoints of %s: %w", id, err)
	}
	defer rows.Close()
	out := []Checkpoint{}
	for rows.Next() {
		var (
			c      Checkpoint
			detail string
		)
		if err := rows.Scan(&c.Cursor, &c.RecordedAt, &detail, &c.LastMessage); err != nil {
			return nil, fmt.Errorf("queries: checkpoints of %s: %w", id, err)
		}
		var tc protocol.TurnCompleted
		if json.Unmarshal([]byte(detail), &tc) != nil || tc.Checkpoint == nil {
			continue
		}
		c.Checkpoint, c.SessionID = *tc.Checkpoint, id
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	markPruned(out)
	// A checkpoint is rewound when a later one has a turn no later than
	// its own: the session went back before it.
	low := int(^uint(0) >> 1)
	for i := len(out) - 1; i >= 0; i-- {
		if low <= out[i].Turn {
			out[i].Rewound = true
		}
		low = min(low, out[i].Turn)
	}
	return out, nil
}

// markPruned marks the checkpoints whose snapshot a checkpoint's report
// lists as pruned.
func markPruned(cps []Checkpoint) {
	pruned := map[string]bool{}
	for _, c := range cps {
		for _, commit := range c.Checkpoint.Pruned {
			pruned[commit] = true
		}
	}
	for i := range cps {
		cps[i].Pruned = pruned[cps[i].Commit]
	}
}
