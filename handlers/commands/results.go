package commands

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/postgres"
)

// Results reads the stored results of handled commands; it is the
// command.ResultStore of clients that may repeat a command id.
type Results struct{ Pool *pgxpool.Pool }

// Result implements command.ResultStore.
func (r Results) Result(ctx context.Context, id uuid.UUID) (command.Result, bool, error) {
	return postgres.ProcessedResult[command.Result](ctx, r.Pool, Consumer, id.String())
}
