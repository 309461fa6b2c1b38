package api

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/sidecar/checkpoint"
)

// maxDiffPatchBytes bounds the unified diffs of one checkpoint diff; the
// files past it are listed without theirs.
const maxDiffPatchBytes = 256 << 10

// CheckpointFileDiff is how one file differs between two checkpoints.
type CheckpointFileDiff struct {
	Path     string `json:"path" doc:"The file's path in the working directory." example:"src/main.go"`
	Status   string `json:"status" enum:"added,removed,changed" doc:"What became of the file." example:"changed"`
	OldBytes int64  `json:"oldBytes" doc:"Its size at the first checkpoint, in bytes (0 when added)." example:"120"`
	NewBytes int64  `json:"newBytes" doc:"Its size at the second checkpoint, in bytes (0 when removed)." example:"134"`
	Binary   bool   `json:"binary" doc:"Git takes it for a binary file: no text diff." example:"false"`
	Patch    string `json:"patch" doc:"The unified diff of a text file (its hunks); empty for a binary file or one past the bound." example:"@@ -1 +1 @@\n-turn one\n+turn two\n"`
	Omitted  string `json:"omitted,omitempty" doc:"Why a text file has no patch: the diffs' size bound (256 KiB in all) was reached." example:"the diff's size bound was reached"`
}

// CheckpointDiff is what changed in a session's working directory from
// one checkpoint to another.
type CheckpointDiff struct {
	SessionID uuid.UUID            `json:"sessionId" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	From      int                  `json:"from" doc:"The first checkpoint's turn." example:"1"`
	To        int                  `json:"to" doc:"The second checkpoint's turn." example:"3"`
	Files     []CheckpointFileDiff `json:"files" nullable:"false" doc:"The files added, removed or changed, in path order."`
}

type checkpointDiffInput struct {
	ID   string `path:"id" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	From int    `query:"from" required:"true" minimum:"0" doc:"The turn of the checkpoint to compare from." example:"1"`
	To   int    `query:"to" required:"true" minimum:"0" doc:"The turn of the checkpoint to compare to." example:"3"`
}

type checkpointDiffOutput struct{ Body CheckpointDiff }

// addCheckpointDiffRoute registers the diff between two checkpoints.
func (s *Server) addCheckpointDiffRoute(api huma.API) {
	register(api, humanOp("get-session-checkpoint-diff", http.MethodGet, "/api/agents/sessions/{id}/checkpoints/diff",
		"Compare two of a session's checkpoints",
		"The files added, removed and changed in the working directory from one checkpoint to another (each named by its turn), with "+
			"their sizes and the unified diff of each text file, within 256 KiB of diffs in all. The API reads the session's checkpoint "+
			"store on its own host (where `up` keeps it): 503 where it is not there. A pruned checkpoint answers 409.",
		"Checkpoints", append(queryErrors, http.StatusConflict)), s.getCheckpointDiff)
}

func (s *Server) getCheckpointDiff(ctx context.Context, in *checkpointDiffInput) (*checkpointDiffOutput, error) {
	owner, id, err := s.readOwned(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	from, err := s.usableCheckpoint(ctx, owner, id, in.From)
	if err != nil {
		return nil, err
	}
	to, err := s.usableCheckpoint(ctx, owner, id, in.To)
	if err != nil {
		return nil, err
	}
	store, err := s.checkpointStore(id)
	if err != nil {
		return nil, err
	}
	files, err := store.Diff(ctx, from.Commit, to.Commit, maxDiffPatchBytes)
	if err != nil {
		return nil, err
	}
	out := &checkpointDiffOutput{Body: CheckpointDiff{SessionID: id, From: in.From, To: in.To, Files: make([]CheckpointFileDiff, 0, len(files))}}
	for _, f := range files {
		out.Body.Files = append(out.Body.Files, CheckpointFileDiff{Path: f.Path, Status: f.Status, OldBytes: f.OldBytes,
			NewBytes: f.NewBytes, Binary: f.Binary, Patch: f.Patch, Omitted: f.Omitted})
	}
	return out, nil
}

// checkpointStore returns the session's checkpoint store on this host, a
// 503 when it is not here.
func (s *Server) checkpointStore(id uuid.UUID) (checkpoint.Store, error) {
	if s.cfg.CheckpointDir != "" {
		dir := filepath.Join(s.cfg.CheckpointDir, id.String()+".git")
		if _, err := os.Stat(filepath.Join(dir, "HEAD")); err == nil {
			return checkpoint.Store{Dir: dir}, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return checkpoint.Store{}, err
		}
	}
	return checkpoint.Store{}, huma.Error503ServiceUnavailable("the session's checkpoint store is not on this server's host")
}
