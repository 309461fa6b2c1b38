package acl

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/postgres/queries"
)

// recordActivity appends one activity item, keyed by the raw event's
// stream sequence, so a redelivered raw event adds nothing. It returns the
// item as recorded, for the live feed.
func recordActivity(ctx context.Context, pool *pgxpool.Pool, seq uint64, rawType, toolUseID string, a domain.ActivityItem) (domain.ActivityItem, error) {
	item, err := activityItem(ctx, pool, seq, rawType, toolUseID, a)
	if err != nil {
		return item, err
	}
	return item, postgres.InsertActivityItem(ctx, pool, item, seq, rawType, toolUseID)
}

// activityItem is the activity item to record for the raw event at seq:
// its id derives from the raw event, and a tool result takes its call's
// tool name, which the call's item recorded before.
func activityItem(ctx context.Context, pool *pgxpool.Pool, seq uint64, rawType, toolUseID string, a domain.ActivityItem) (domain.ActivityItem, error) {
	if a.Type == domain.ActivityToolCallEnd && a.ToolName == "" && toolUseID != "" {
		// The result names only its call: the call's item has the tool.
		tool, err := queries.ToolOfCall(ctx, pool, a.SessionID, toolUseID)
		if err != nil && !errors.Is(err, queries.ErrNotFound) {
			// Only "no such call" may record the result without its tool:
			// a failed read is retried, not acked with a wrong item.
			return a, fmt.Errorf("acl: tool of call %s: %w", toolUseID, err)
		}
		a.ToolName = tool
	}
	a.ID = uuid.NewSHA1(commandNamespace, []byte(a.SessionID.String()+"/activity/"+rawType+"/"+strconv.FormatUint(seq, 10)))
	if a.Summary == "" {
		a.Summary = rawType
	}
	item, err := domain.NewActivityItem(a)
	if err != nil {
		// An item the model refuses (a result whose call was never seen)
		// is still recorded, as an unknown event under its raw type.
		a.Type, a.Summary, a.ToolName = domain.ActivityUnknownEvent, rawType, ""
		if item, err = domain.NewActivityItem(a); err != nil {
			return item, err
		}
	}
	return item, nil
}
