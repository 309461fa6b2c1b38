package acl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/feed"
	"github.com/agentbus/agentbus/handlers/acl"
)

// TestASessionsEventsThatWaitedShareOneWrite holds the session's first
// write on a table lock while its next events arrive: once it is
// released, the events that waited are recorded together rather than in
// a write each, every one is recorded once, and the feed carries them in
// the order they happened.
func TestASessionsEventsThatWaitedShareOneWrite(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	id := s.runningSession(t)
	const n = 9 // the first and eight waiting behind it
	before := s.worker.Writes()

	tx, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	_, err = tx.Exec(ctx, "LOCK TABLE activity_items IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)
	for i := range n {
		s.raw(t, id, "assistant_message", map[string]any{"message_id": fmt.Sprintf("m%d", i), "block_type": "text", "text": fmt.Sprintf("part %d", i)})
	}
	require.Eventually(t, func() bool {
		c, err := s.js.Consumer(ctx, bus.StreamSidecarEvents, acl.Consumer)
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.NumAckPending == n
	}, 30*time.Second, 10*time.Millisecond, "the worker holds every event while the first write waits")
	require.NoError(t, tx.Rollback(ctx))

	require.Eventually(t, func() bool { return len(s.activity(t, id)) == n }, 30*time.Second, 20*time.Millisecond)
	writes := s.worker.Writes() - before
	assert.LessOrEqual(t, writes, int64(3), "the first event's write, then one for those that waited (%d writes for %d events)", writes, n)

	var texts []string
	items, err := s.js.OrderedConsumer(ctx, bus.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{bus.EventSubject(feed.Aggregate, id.String(), feed.KindAssistantText)}})
	require.NoError(t, err)
	for range n {
		m, err := items.Next(jetstream.FetchMaxWait(30 * time.Second))
		require.NoError(t, err)
		var env bus.Envelope
		require.NoError(t, json.Unmarshal(m.Data(), &env))
		var d feed.LiveAssistantText
		require.NoError(t, json.Unmarshal(env.Data, &d))
		texts = append(texts, d.Text)
	}
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("part %d", i)
	}
	assert.Equal(t, want, texts, "the feed keeps the order of the raw events")
}
