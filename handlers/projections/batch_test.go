package projections_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/handlers/projections"
)

// TestASessionsEventsThatWaitedShareOneTransaction holds the session's
// first event on a table lock while the next ones arrive: once released,
// those that waited are projected in one transaction (their rows share the
// transaction id that wrote them) rather than in a commit each, and the
// transcript is complete.
func TestASessionsEventsThatWaitedShareOneTransaction(t *testing.T) {
	s := start(t, true)
	ctx := context.Background()
	id := uuid.New()
	const n = 10

	tx, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	_, err = tx.Exec(ctx, "LOCK TABLE agent_messages IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)
	for i := range n {
		s.raw(t, id, "assistant_message", map[string]any{"message_id": fmt.Sprintf("m%d", i), "block_type": "text", "text": fmt.Sprintf("part %d", i)})
	}
	require.Eventually(t, func() bool {
		c, err := s.js.Consumer(ctx, bus.StreamSidecarEvents, projections.Consumer)
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.NumAckPending == n
	}, 30*time.Second, 10*time.Millisecond, "the worker holds every event while the first waits")
	require.NoError(t, tx.Rollback(ctx))

	require.Eventually(t, func() bool { return s.count(t, "agent_messages", id) == n }, 30*time.Second, 20*time.Millisecond)
	var transactions int
	require.NoError(t, s.pool.QueryRow(ctx, "SELECT count(DISTINCT xmin::text) FROM agent_messages WHERE session_id = $1", id).Scan(&transactions))
	assert.LessOrEqual(t, transactions, 3, "the first event's transaction, then one for those that waited (%d for %d events)", transactions, n)
	assert.Equal(t, n, s.count(t, "session_log_chunks", id), "every event's log line too")
}
