package acl

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/internal/testenv"
)

// TestRecordActivityReturnsAFailedToolLookup: the result of a tool call
// takes the call's tool name from the database. When that read fails, the
// item must not be recorded as if the call were unknown: the error is
// returned, so the raw event is retried. The read fails here for real: the
// worker's role may insert activity items but not read them.
func TestRecordActivityReturnsAFailedToolLookup(t *testing.T) {
	dsn := testenv.PostgresURL(t)
	ctx := context.Background()
	admin, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	role := fmt.Sprintf("acl_writer_%d", time.Now().UnixNano())
	_, err = admin.Exec(ctx, fmt.Sprintf(`CREATE ROLE %s LOGIN; GRANT INSERT, SELECT (id, source_seq) ON activity_items TO %s`, role, role))
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = admin.Exec(ctx, fmt.Sprintf(`REVOKE ALL ON activity_items FROM %s; DROP ROLE %s`, role, role))
	})
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	u.User = url.User(role)
	writer, err := pgxpool.New(ctx, u.String())
	require.NoError(t, err)
	t.Cleanup(writer.Close)

	session := uuid.New()
	end := domain.ActivityItem{Type: domain.ActivityToolCallEnd, SessionID: session, Summary: "ok", Timestamp: time.Now()}
	_, err = recordActivity(ctx, writer, 1, "tool_result", "toolu_1", end)
	require.Error(t, err, "a failed read of the call is an error, not an unknown call")

	var n int
	require.NoError(t, admin.QueryRow(ctx, "SELECT count(*) FROM activity_items WHERE session_id = $1", session).Scan(&n))
	assert.Zero(t, n, "nothing is recorded with a guessed tool")

	_, err = recordActivity(ctx, admin, 1, "tool_result", "toolu_1", end)
	require.NoError(t, err, "with the read allowed it records")
	var typ string
	require.NoError(t, admin.QueryRow(ctx, "SELECT type FROM activity_items WHERE session_id = $1", session).Scan(&typ))
	assert.Equal(t, string(domain.ActivityUnknownEvent), typ, "a result whose call was never seen")
}
