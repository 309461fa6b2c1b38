package claude_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/sidecar/protocol"
)

// TestAForkAtACheckpointCarriesTheConversationUpToItsTurn runs two turns,
// then forks the conversation at the first turn's checkpoint: the fork's
// next request to the model holds the first turn and nothing of the
// second.
func TestAForkAtACheckpointCarriesTheConversationUpToItsTurn(t *testing.T) {
	t.Parallel()
	w := newWorld(t,
		reply{match: userSaid("Remember the word kumquat."), blocks: []block{text("Noted: kumquat.")}},
		reply{match: userSaid("Now remember the word fig."), blocks: []block{text("Noted: fig.")}},
		reply{
			match: func(r modelRequest) error {
				all := r.allText()
				switch {
				case !strings.Contains(all, "Remember the word kumquat.") || !strings.Contains(all, "Noted: kumquat."):
					return fmt.Errorf("the fork lacks the first turn: %s", all)
				case strings.Contains(all, "the word fig") || strings.Contains(all, "Noted: fig."):
					return fmt.Errorf("the fork holds the turn after its checkpoint: %s", all)
				}
				return userSaid("Which words do you remember?")(r)
			},
			blocks: []block{text("Just kumquat.")},
		},
	)
	cfg := w.config("Remember the word kumquat.")
	cfg.StayIdle = true
	cfg.CheckpointStore = filepath.Join(t.TempDir(), "checkpoints.git")
	parent := w.start(cfg)
	done := func(h *harness, n int) {
		h.waitFor(fmt.Sprintf("turn %d", n), func(e protocol.Entry) bool {
			if e.Type != protocol.EventTurnCompleted {
				return false
			}
			tc := decode[protocol.TurnCompleted](t, e)
			return tc.Done && tc.NumTurns == n
		})
	}
	done(parent, 1)
	parent.send(protocol.CommandSteeringMessage, protocol.SteeringMessage{
		MessageID: "a1b2c3d4-0000-4000-8000-000000000002", Content: "Now remember the word fig.", Priority: protocol.PriorityQueued})
	done(parent, 2)
	parent.send(protocol.CommandStop, protocol.Stop{})
	parent.waitEnd()
	var cps []protocol.Checkpoint
	for _, e := range parent.ofType(protocol.EventTurnCompleted) {
		if tc := decode[protocol.TurnCompleted](t, e); tc.Checkpoint != nil {
			cps = append(cps, *tc.Checkpoint)
		}
	}
	require.Len(t, cps, 2)
	require.NotEmpty(t, cps[0].Position, "the checkpoint names the conversation's last entry")
	assert.NotEqual(t, cps[0].Position, cps[1].Position)
	parentID := parent.started().EngineSessionID
	assert.Equal(t, parentID, cps[0].EngineSessionID)

	fork := w.config("Remember the word kumquat.")
	fork.StayIdle = true
	fork.ResumeEngineSessionID, fork.ResumeAt, fork.ForkEngineSession = cps[0].EngineSessionID, cps[0].Position, true
	fork.TurnsBefore = cps[0].Turn
	h := w.start(fork)
	h.waitType(protocol.EventTurnCompleted)
	h.send(protocol.CommandSteeringMessage, protocol.SteeringMessage{
		MessageID: "a1b2c3d4-0000-4000-8000-000000000003", Content: "Which words do you remember?", Priority: protocol.PriorityQueued})
	done(h, 1)
	h.send(protocol.CommandStop, protocol.Stop{})
	h.waitEnd()

	assert.NotEqual(t, parentID, h.started().EngineSessionID, "the fork is a conversation of its own")
	msgs := h.ofType(protocol.EventAssistantMessage)
	require.Len(t, msgs, 1)
	assert.Equal(t, "Just kumquat.", decode[protocol.AssistantMessage](t, msgs[0]).Text)
	assert.Zero(t, w.model.remaining())
}
