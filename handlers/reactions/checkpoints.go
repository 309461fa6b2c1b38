package reactions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/postgres/queries"
	"github.com/agentbus/agentbus/sidecar/checkpoint"
	"github.com/agentbus/agentbus/sidecar/launcher"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// resumeAt points cfg at a checkpoint: the engine resumes the checkpoint's
// conversation at its position, as a conversation of its own, and counts
// turns on from it.
func resumeAt(cfg *protocol.Config, cp queries.Checkpoint) {
	cfg.ResumeEngineSessionID, cfg.ResumeAt, cfg.ForkEngineSession = cp.EngineSessionID, cp.Position, true
	cfg.TurnsBefore = cp.Turn
}

// startFork prepares the first sidecar of a fork: its working directory
// becomes a copy of the parent's checkpoint (unless an earlier attempt
// made it already) and its agent goes on from the checkpoint's
// conversation. A sidecar started again later resumes the fork's own
// conversation instead.
func (r Runtime) startFork(ctx context.Context, s *domain.AgentSession, cfg *protocol.Config) error {
	fp := s.ForkedFrom()
	if fp == nil {
		return nil
	}
	n, err := r.Redis.Exists(ctx, protocol.EngineKey(s.ID().String())).Result()
	if err != nil {
		return err
	}
	if n > 0 {
		return nil // the fork ran already: it resumes its own conversation
	}
	cp, err := queries.SessionCheckpointAt(ctx, r.DB, fp.SessionID, fp.Turn)
	if err == nil && cp.Pruned {
		err = errors.New("the checkpoint was pruned by the retention policy")
	}
	if err != nil {
		return bus.Permanent(fmt.Errorf("fork %s: %w", s.ID(), err))
	}
	if _, err := os.Stat(cfg.WorkingDirectory); errors.Is(err, os.ErrNotExist) {
		store := r.Launcher.CheckpointStore(fp.SessionID.String())
		if store == "" {
			return bus.Permanent(fmt.Errorf("fork %s: the runtime keeps no checkpoints", s.ID()))
		}
		// Copied aside, then renamed into place: the directory is either
		// missing or whole.
		tmp := cfg.WorkingDirectory + ".forking"
		if err := os.RemoveAll(tmp); err != nil {
			return err
		}
		if err := (checkpoint.Store{Dir: store}).Restore(ctx, tmp, cp.Commit); err != nil {
			return fmt.Errorf("fork %s: copy the checkpoint: %w", s.ID(), err)
		}
		if err := os.MkdirAll(filepath.Dir(cfg.WorkingDirectory), 0o755); err != nil {
			return err
		}
		if err := os.Rename(tmp, cfg.WorkingDirectory); err != nil {
			return fmt.Errorf("fork %s: %w", s.ID(), err)
		}
	}
	// The fork's agent resumes the parent's conversation from the fork's
	// own store: the parent's agent home is not the fork's.
	from, to := r.Launcher.CheckpointStore(fp.SessionID.String()), r.Launcher.CheckpointStore(s.ID().String())
	if from != "" && to != "" && cp.EngineSessionID != "" {
		if err := checkpoint.CopyConversation(ctx, checkpoint.Store{Dir: from}, checkpoint.Store{Dir: to}, cp.EngineSessionID); err != nil {
			return fmt.Errorf("fork %s: copy the conversation: %w", s.ID(), err)
		}
	}
	resumeAt(cfg, cp)
	cfg.ResumeWithObjective = fp.NewObjective
	return nil
}

// turnsBefore returns the turn of the session's newest checkpoint: a
// sidecar started again numbers its checkpoints on from it.
func (r Runtime) turnsBefore(ctx context.Context, id uuid.UUID) (int, error) {
	cps, err := queries.SessionCheckpoints(ctx, r.DB, id)
	if err != nil || len(cps) == 0 {
		return 0, err
	}
	return cps[len(cps)-1].Turn, nil
}

// rewind restores a session's working directory to a checkpoint and
// starts its sidecar again on the checkpoint's conversation. The sidecar
// running is stopped first (it suspends: the session goes on).
func (r Runtime) rewind(ctx context.Context, env bus.Envelope, id uuid.UUID) error {
	var e domain.SessionRewoundEvent
	if err := json.Unmarshal(env.Data, &e); err != nil {
		return bus.Permanent(err)
	}
	if !r.Launcher.Process() {
		return nil // whoever runs the sidecars restores them
	}
	unlock := r.locks.lock(id)
	defer unlock()
	s, err := postgres.Sessions{}.Get(ctx, r.DB, id)
	if errors.Is(err, postgres.ErrNotFound) {
		return bus.Permanent(err)
	}
	if err != nil {
		return err
	}
	if !s.Status().HasSidecar() {
		return nil // it ended since
	}
	cp, err := queries.SessionCheckpointAt(ctx, r.DB, id, e.Turn)
	if err == nil && cp.Pruned {
		err = errors.New("the checkpoint was pruned by the retention policy")
	}
	if err != nil {
		return bus.Permanent(fmt.Errorf("rewind %s: %w", id, err))
	}
	if err := r.Launcher.Stop(id.String()); err != nil && !errors.Is(err, launcher.ErrNotRunning) {
		return err
	}
	if err := r.Workspace.Check(s.OwnerID(), s.WorkingDirectory()); err != nil {
		return bus.Permanent(fmt.Errorf("rewind %s: the working directory %w", id, err))
	}
	store := r.Launcher.CheckpointStore(id.String())
	if err := (checkpoint.Store{Dir: store}).Restore(ctx, s.WorkingDirectory(), cp.Commit); err != nil {
		return fmt.Errorf("rewind %s: %w", id, err)
	}
	cfg, err := sidecarConfig(ctx, r.DB, s, r.Engine)
	if err != nil {
		return err
	}
	resumeAt(&cfg, cp)
	cfg.StartPaused = s.Status() == domain.StatusPaused
	key, err := r.sidecarKey(ctx, id)
	if err != nil || key == "" {
		return err
	}
	limits, err := r.sandboxLimits(ctx, s)
	if err != nil {
		return err
	}
	slog.Info("session rewound", "component", "runtime", "session_id", id, "turn", cp.Turn, "snapshot", cp.Commit)
	_, err = r.Launcher.StartSession(ctx, cfg, key, limits)
	if errors.Is(err, launcher.ErrClosed) {
		return nil
	}
	return err
}
