package acl_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/feed"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// TestRecordedItemsAndTextDeltasGoOnTheSessionsFeed sends a text delta, a
// tool call, its result and a text block: each comes on the session's feed
// subjects, in order, with its kind's shape; the delta is not recorded.
func TestRecordedItemsAndTextDeltasGoOnTheSessionsFeed(t *testing.T) {
	s := start(t)
	id := s.runningSession(t)
	s.raw(t, id, protocol.EventTextDelta, protocol.TextDelta{MessageID: "msg_1", Index: 0, Text: "Running the"})
	s.raw(t, id, protocol.EventAssistantMessage, protocol.AssistantMessage{MessageID: "msg_1", BlockType: protocol.BlockToolUse,
		ToolUseID: "toolu_1", ToolName: "Bash", Input: json.RawMessage(`{"command":"go test ./..."}`)})
	s.raw(t, id, protocol.EventToolResult, protocol.ToolResult{ToolUseID: "toolu_1", Content: "ok"})
	s.raw(t, id, protocol.EventAssistantMessage, protocol.AssistantMessage{MessageID: "msg_2", BlockType: protocol.BlockText, Text: "Done."})

	ctx := context.Background()
	cons, err := s.js.OrderedConsumer(ctx, bus.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{bus.EventSubject(feed.Aggregate, id.String(), ">")}})
	require.NoError(t, err)
	var kinds []string
	var envs []bus.Envelope
	for len(kinds) < 4 {
		m, err := cons.Next(jetstream.FetchMaxWait(30 * time.Second))
		require.NoError(t, err, "feed so far: %v", kinds)
		env, err := bus.DecodeEnvelope(m.Data())
		require.NoError(t, err)
		assert.Equal(t, s.owner.String(), env.OwnerID, "the all-sessions stream filters on it")
		kinds = append(kinds, env.Type)
		envs = append(envs, env)
	}
	require.Equal(t, []string{feed.KindTextDelta, feed.KindToolCall, feed.KindToolResult, feed.KindAssistantText}, kinds)

	var delta feed.LiveTextDelta
	require.NoError(t, json.Unmarshal(envs[0].Data, &delta))
	assert.Equal(t, feed.LiveTextDelta{SessionID: id.String(), MessageID: "msg_1", Text: "Running the", OccurredAt: delta.OccurredAt}, delta)
	var call feed.LiveToolCall
	require.NoError(t, json.Unmarshal(envs[1].Data, &call))
	assert.Equal(t, "Bash", call.ToolName)
	assert.Equal(t, map[string]any{"command": "go test ./..."}, call.Input)
	var result feed.LiveToolResult
	require.NoError(t, json.Unmarshal(envs[2].Data, &result))
	assert.Equal(t, "toolu_1", result.ToolUseID)
	assert.Equal(t, "Bash", result.ToolName, "the result names its call's tool")
	var text feed.LiveAssistantText
	require.NoError(t, json.Unmarshal(envs[3].Data, &text))
	assert.Equal(t, "Done.", text.Text)

	recorded := s.activity(t, id)
	for _, a := range recorded {
		assert.NotContains(t, a, protocol.EventTextDelta, "a delta is not recorded")
	}
	assert.Len(t, recorded, 3, "%v", recorded)
}
