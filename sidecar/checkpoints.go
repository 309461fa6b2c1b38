package sidecar

import (
	"context"
	"fmt"
	"time"

	"github.com/agentbus/agentbus/sidecar/checkpoint"
	"github.com/agentbus/agentbus/sidecar/engine"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// checkpointTimeout bounds one snapshot of the working directory.
const checkpointTimeout = 2 * time.Minute

// checkpoint snapshots the working directory at the end of the session's
// n-th turn of this sidecar and returns it with the engine's position,
// or nil when the sidecar keeps no checkpoints or the snapshot failed (the
// session goes on; the log says why).
func (r *runner) checkpoint(n int) *protocol.Checkpoint {
	cfg := r.config()
	if cfg.CheckpointStore == "" || cfg.WorkingDirectory == "" {
		return nil
	}
	turn := cfg.TurnsBefore + n
	ctx, cancel := context.WithTimeout(context.Background(), checkpointTimeout)
	defer cancel()
	started := time.Now()
	store := checkpoint.Store{Dir: cfg.CheckpointStore}
	snap, err := store.Take(ctx, cfg.WorkingDirectory, fmt.Sprintf("turn %d", turn))
	if err != nil {
		r.log.Error("checkpoint not taken", "turn", turn, "error", err)
		return nil
	}
	cp := &protocol.Checkpoint{Turn: turn, Commit: snap.Commit, Tree: snap.Tree, FilesChanged: snap.FilesChanged,
		EngineSessionID: r.sess.ID(), Bytes: snap.Bytes, AddedBytes: snap.AddedBytes}
	if p, ok := r.sess.(engine.Positioner); ok {
		cp.Position = p.Position()
	}
	r.keepTranscript(ctx, cfg.CheckpointStore)
	r.retain(ctx, store, cp)
	r.log.Info("checkpoint taken", "turn", turn, "commit", snap.Commit, "files_changed", snap.FilesChanged,
		"bytes", snap.Bytes, "store_bytes", cp.StoreBytes, "pruned", len(cp.Pruned), "took", time.Since(started))
	return cp
}

// retain prunes the checkpoints the retention policy no longer keeps and
// records in cp which it pruned and the store's size after; a failure is
// logged and leaves the store as it was (or pruned in part: what was
// pruned is still reported).
func (r *runner) retain(ctx context.Context, store checkpoint.Store, cp *protocol.Checkpoint) {
	cfg := r.config()
	policy := checkpoint.Retention{Keep: cfg.CheckpointKeep, MaxAge: time.Duration(cfg.CheckpointMaxAgeSeconds) * time.Second}
	if policy != (checkpoint.Retention{}) {
		pruned, err := store.Prune(ctx, policy, time.Now())
		cp.Pruned = pruned
		if err != nil {
			r.log.Error("checkpoints not pruned", "error", err)
		}
	}
	n, err := store.DiskBytes()
	if err != nil {
		r.log.Error("checkpoint store not measured", "error", err)
	}
	cp.StoreBytes = n
}

// keepTranscript keeps a copy of the engine's conversation in the store,
// for a fork or rewind to resume; a failure is logged and leaves the
// copy kept before.
func (r *runner) keepTranscript(ctx context.Context, store string) {
	t, ok := r.sess.(engine.Transcriber)
	if !ok {
		return
	}
	transcript, err := t.Transcript()
	if err == nil && transcript != nil {
		err = checkpoint.Store{Dir: store}.SaveConversation(ctx, r.sess.ID(), transcript)
	}
	if err != nil {
		r.log.Error("conversation not kept with the checkpoint", "error", err)
	}
}
