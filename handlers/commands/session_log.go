package commands

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
)

// The agent's decisions go through the commands worker, not straight from
// the API to the table: the handler checks the session's owner and status
// like every session command, and the dispatcher runs it once per command
// id (the request's Idempotency-Key), so a retried request appends nothing
// twice. The session is only read: a decision changes no state and raises
// no event, so it never contends with the session's own commands.
func registerSessionLog(d *Dispatcher, now Clock) {
	d.Register(domain.AggregateSession, command.LogDecision, func(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
		in, err := decode[command.LogDecisionData](cmd)
		if err != nil {
			return nil, err
		}
		if n := utf8.RuneCountInString(in.Content); n > command.MaxLogDecisionChars {
			return nil, &domain.ValidationError{FieldName: "content",
				Message: fmt.Sprintf("must be at most %d characters, not %d", command.MaxLogDecisionChars, n)}
		}
		s, err := ownSession(ctx, tx, cmd, cmd.AggregateID)
		if err != nil {
			return nil, err
		}
		chunk := domain.SessionLogChunk{Content: in.Content, RecordedAt: now().UTC()}
		if err := s.RecordLogChunk(chunk); err != nil {
			return nil, err
		}
		// The chunk's id is the command's: a repeated command that got past
		// the dispatcher's check still appends one chunk.
		if err := postgres.InsertLogChunk(ctx, tx, cmd.ID, s.ID(), "decision", chunk); err != nil {
			return nil, err
		}
		return command.LogChunkResult{ID: cmd.ID, SessionID: s.ID(), Kind: "decision", Content: chunk.Content,
			RecordedAt: chunk.RecordedAt}, nil
	})
}
