package sidecar_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/sidecar/checkpoint"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

func TestEveryTurnEndsWithACheckpointOfTheWorkingDirectory(t *testing.T) {
	t.Parallel()
	cfg := scriptConfig(t, "files")
	cfg.CheckpointStore = filepath.Join(t.TempDir(), "checkpoints.git")
	h := start(t, cfg)
	h.waitEnd()

	var cps []protocol.Checkpoint
	for _, e := range h.ofType(protocol.EventTurnCompleted) {
		strictDecode(t, e)
		tc := decode[protocol.TurnCompleted](t, e)
		require.NotNil(t, tc.Checkpoint, "turn %d has a checkpoint", tc.NumTurns)
		assert.Equal(t, tc.NumTurns, tc.Checkpoint.Turn)
		cps = append(cps, *tc.Checkpoint)
	}
	require.Len(t, cps, 3)
	assert.Equal(t, []int{2, 2, 3}, []int{cps[0].FilesChanged, cps[1].FilesChanged, cps[2].FilesChanged})
	started := decode[protocol.SessionStarted](t, h.ofType(protocol.EventSessionStarted)[0])
	for _, cp := range cps {
		assert.Equal(t, started.EngineSessionID, cp.EngineSessionID)
	}
	assert.Equal(t, "scenario=files turn=1 seq=4", cps[0].Position)

	store := checkpoint.Store{Dir: cfg.CheckpointStore}
	copyDir := filepath.Join(t.TempDir(), "copy")
	require.NoError(t, store.Restore(context.Background(), copyDir, cps[0].Commit))
	readme, err := os.ReadFile(filepath.Join(copyDir, "README.md"))
	require.NoError(t, err)
	assert.Contains(t, string(readme), "turn one")
	assert.FileExists(t, filepath.Join(copyDir, "src/main.go"))
	assert.NoFileExists(t, filepath.Join(copyDir, "pkg/util.go"))
	assert.NoDirExists(t, filepath.Join(cfg.WorkingDirectory, "checkpoints.git"), "the store lies outside the working directory")

	t.Run("a fork resumes the scenario after the checkpoint's turn", func(t *testing.T) {
		fork := scriptConfig(t, "files")
		fork.WorkingDirectory = copyDir
		fork.ResumeEngineSessionID, fork.ResumeAt, fork.ForkEngineSession = cps[0].EngineSessionID, cps[0].Position, true
		fork.TurnsBefore = cps[0].Turn
		fork.CheckpointStore = filepath.Join(t.TempDir(), "fork.git")
		fork.StayIdle = true
		h := start(t, fork)
		h.send(protocol.CommandSteeringMessage, protocol.SteeringMessage{MessageID: "m1", Content: "go on", Priority: protocol.PriorityQueued})
		h.waitFor("the fork's last turn", func(e protocol.Entry) bool {
			return e.Type == protocol.EventTurnCompleted && decode[protocol.TurnCompleted](t, e).Done
		})
		h.send(protocol.CommandStop, struct{}{})
		h.waitEnd()
		st := decode[protocol.SessionStarted](t, h.ofType(protocol.EventSessionStarted)[0])
		assert.NotEqual(t, cps[0].EngineSessionID, st.EngineSessionID, "a fork is a conversation of its own")
		var turns []int
		for _, e := range h.ofType(protocol.EventTurnCompleted) {
			if tc := decode[protocol.TurnCompleted](t, e); tc.Checkpoint != nil {
				turns = append(turns, tc.Checkpoint.Turn)
			}
		}
		assert.Equal(t, []int{1, 2, 3, 4}, turns, "the restored state, the reply, then the scenario's turns two and three")
		readme, err := os.ReadFile(filepath.Join(copyDir, "README.md"))
		require.NoError(t, err)
		assert.Contains(t, string(readme), "turn three")
		assert.NoFileExists(t, filepath.Join(copyDir, "src/main.go"))
	})
}
