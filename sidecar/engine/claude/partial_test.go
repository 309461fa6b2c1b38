package claude_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/sidecar/protocol"
)

// TestTextDeltasAreWrittenWhileTheModelIsStillWriting holds the model's
// response open after its text: the text must already be on the event
// stream as text_delta, before the message is finished and the turn ends.
func TestTextDeltasAreWrittenWhileTheModelIsStillWriting(t *testing.T) {
	t.Parallel()
	w := newWorld(t,
		reply{blocks: []block{text("Streaming hello to you.")}, hold: time.Hour},
	)
	h := w.start(w.config("Say hello slowly"))
	first := h.waitType(protocol.EventTextDelta)

	var streamed strings.Builder
	for _, e := range h.ofType(protocol.EventTextDelta) {
		d := decode[protocol.TextDelta](t, e)
		assert.Equal(t, 0, d.Index)
		assert.Equal(t, decode[protocol.TextDelta](t, first).MessageID, d.MessageID, "the deltas of one message")
		streamed.WriteString(d.Text)
	}
	require.NotEmpty(t, decode[protocol.TextDelta](t, first).MessageID)
	assert.Equal(t, "Streaming hello to you.", streamed.String())
	assert.Empty(t, h.ofType(protocol.EventTurnCompleted), "the turn is still running: the model holds its response")
	assert.Empty(t, h.ofType(protocol.EventSessionEnd))
}
