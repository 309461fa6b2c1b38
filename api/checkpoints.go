package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres/queries"
)

// ForkedFrom links a fork to the checkpoint it started from.
type ForkedFrom struct {
	SessionID  uuid.UUID `json:"sessionId" format:"uuid" doc:"The parent session." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	Checkpoint int       `json:"checkpoint" doc:"The parent's turn whose checkpoint the fork started from." example:"1"`
}

// Checkpoint is the state of a session at the end of one of its turns.
type Checkpoint struct {
	Turn            int       `json:"turn" doc:"The turn the checkpoint ends; fork and rewind name a checkpoint by it." example:"2"`
	RecordedAt      time.Time `json:"recordedAt" doc:"When the turn ended." example:"2026-03-01T09:00:05Z"`
	FilesChanged    int       `json:"filesChanged" doc:"Files the turn added, changed or removed." example:"3"`
	LastMessage     string    `json:"lastMessage" doc:"The agent's last text message of the turn; empty when it wrote none." example:"The retries are in place."`
	Snapshot        string    `json:"snapshot" doc:"The working directory's snapshot id (a git commit in the session's checkpoint store)." example:"3f1c9a0e5b7d2c4a6e8f0b1d3c5e7a9b2d4f6a8c"`
	Tree            string    `json:"tree" doc:"The snapshot's tree id: two checkpoints with the same tree hold the same files." example:"9b2d4f6a8c3f1c9a0e5b7d2c4a6e8f0b1d3c5e7a"`
	EngineSessionID string    `json:"engineSessionId" doc:"The engine's conversation the agent was in." example:"script-5d6e7f8a-9b0c-4d1e-8f2a-3b4c5d6e7f8a"`
	Rewound         bool      `json:"rewound" doc:"The session was later rewound before this checkpoint: it is kept, and may still be forked, but is no longer on the session's line." example:"false"`
	Cursor          int64     `json:"cursor" doc:"The activity cursor of the turn's end: the activity up to it is what the checkpoint had." example:"1042"`
	Bytes           int64     `json:"bytes" doc:"The size of the snapshot's files, in bytes (0 when its sidecar did not measure it)." example:"48213"`
	AddedBytes      int64     `json:"addedBytes" doc:"The size of the files the turn added or changed, in bytes: about what the checkpoint added to the store before compression." example:"2048"`
	Pruned          bool      `json:"pruned" doc:"The retention policy dropped the checkpoint's snapshot from the store: it is listed, but can no longer be forked or rewound to (409)." example:"false"`
}

// CheckpointList is a session's checkpoints.
type CheckpointList struct {
	SessionID  uuid.UUID    `json:"sessionId" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	Items      []Checkpoint `json:"items" nullable:"false" doc:"The checkpoints, oldest first, the pruned ones included."`
	Kept       int          `json:"kept" doc:"How many of them are still in the store (not pruned)." example:"5"`
	StoreBytes int64        `json:"storeBytes" doc:"The size on disk of the session's checkpoint store, in bytes, as measured after its newest checkpoint and the retention's pruning." example:"1048576"`
}

// ForkRequest forks a session at one of its checkpoints.
type ForkRequest struct {
	Checkpoint int    `json:"checkpoint" minimum:"0" doc:"The turn whose checkpoint the fork starts from (see the checkpoints list)." example:"1"`
	Objective  string `json:"objective,omitempty" maxLength:"2000" doc:"What the fork is to do next: its agent's first message, on top of the conversation up to the checkpoint. Without it the fork waits for a message, with the parent's objective." example:"Try it with a circuit breaker instead."`
	Name       string `json:"name,omitempty" maxLength:"200" doc:"A name for the fork; by default the parent's, marked as a fork." example:"HTTP retries (circuit breaker)"`
}

// RewindRequest takes a session back to one of its checkpoints.
type RewindRequest struct {
	Checkpoint int `json:"checkpoint" minimum:"0" doc:"The turn whose checkpoint the session goes back to." example:"2"`
}

type forkInput struct {
	ID   string `path:"id" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	Body ForkRequest
}

type rewindInput struct {
	ID   string `path:"id" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	Body RewindRequest
}

type checkpointsOutput struct{ Body CheckpointList }

// forkNamespace derives a fork's id from the id of the command that
// creates it, so a repeated fork names the same session.
var forkNamespace = uuid.MustParse("4f5a7c2e-8d1b-4b3a-9e6f-0c2d4e6a8b1c")

// addCheckpointRoutes registers the checkpoints of a session, fork and
// rewind.
func (s *Server) addCheckpointRoutes(api huma.API) {
	register(api, humanOp("get-session-checkpoints", http.MethodGet, "/api/agents/sessions/{id}/checkpoints", "List a session's checkpoints",
		"The state the session had at the end of each turn: its working directory's snapshot and where its agent's conversation stood. "+
			"Fork or rewind the session at one of them. The runtime's retention policy (AGENTBUS_CHECKPOINT_KEEP, AGENTBUS_CHECKPOINT_MAX_AGE) "+
			"prunes old ones from the store: they stay listed, marked pruned. Sizes show what each checkpoint and the store take.",
		"Checkpoints", queryErrors), s.getCheckpoints)
	fork := humanOp("fork-session", http.MethodPost, "/api/agents/sessions/{id}/fork", "Fork a session at a checkpoint",
		"Creates a new session (Queued until a pool slot is free, like any start) whose working directory is a new copy of the checkpoint's "+
			"snapshot and whose agent goes on from the conversation as it stood at that checkpoint. The parent is untouched. "+
			"A checkpoint the retention policy pruned answers 409.",
		"Checkpoints", append(commandErrors, http.StatusUnprocessableEntity, http.StatusConflict))
	fork.DefaultStatus = http.StatusCreated
	fork.Metadata = map[string]any{metaReplayByCommand: true}
	register(api, fork, s.forkSession)
	register(api, humanOp("rewind-session", http.MethodPost, "/api/agents/sessions/{id}/rewind", "Rewind a session to a checkpoint",
		"Takes an Idle, Paused or Interrupted session back to a checkpoint: its working directory and its agent's conversation are restored. "+
			"What came after stays in the transcript (the later checkpoints are marked rewound) and the metrics keep what it cost. "+
			"A checkpoint the retention policy pruned answers 409.",
		"Checkpoints", append(commandErrors, http.StatusUnprocessableEntity, http.StatusConflict)), s.rewindSession)
}

func checkpointOf(c queries.Checkpoint) Checkpoint {
	return Checkpoint{Turn: c.Turn, RecordedAt: c.RecordedAt, FilesChanged: c.FilesChanged, LastMessage: c.LastMessage,
		Snapshot: c.Commit, Tree: c.Tree, EngineSessionID: c.EngineSessionID, Rewound: c.Rewound, Cursor: c.Cursor,
		Bytes: c.Bytes, AddedBytes: c.AddedBytes, Pruned: c.Pruned}
}

// usableCheckpoint returns the session's newest checkpoint of turn: 404
// when there is none, 409 when the retention policy pruned it.
func (s *Server) usableCheckpoint(ctx context.Context, owner, id uuid.UUID, turn int) (queries.Checkpoint, error) {
	cp, err := s.deps.Queries.CheckpointAt(ctx, owner, id, turn)
	if err != nil {
		return cp, err
	}
	if cp.Pruned {
		return cp, NewKindError(KindConflict, fmt.Sprintf("the checkpoint of turn %d was pruned by the checkpoint retention policy", turn))
	}
	return cp, nil
}

func (s *Server) getCheckpoints(ctx context.Context, in *sessionIDInput) (*checkpointsOutput, error) {
	owner, id, err := s.readOwned(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	cps, err := s.deps.Queries.Checkpoints(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	out := &checkpointsOutput{Body: CheckpointList{SessionID: id, Items: make([]Checkpoint, 0, len(cps))}}
	for _, c := range cps {
		out.Body.Items = append(out.Body.Items, checkpointOf(c))
		if !c.Pruned {
			out.Body.Kept++
		}
	}
	if len(cps) > 0 {
		out.Body.StoreBytes = cps[len(cps)-1].StoreBytes
	}
	return out, nil
}

// forkSession starts a session like its parent (template, model, budget,
// skills, tool approval) from one of the parent's checkpoints; the
// runtime copies the snapshot into the fork's new working directory.
func (s *Server) forkSession(ctx context.Context, in *forkInput) (*startSessionOutput, error) {
	owner, parentID, err := s.readOwned(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	parent, err := s.deps.Queries.Session(ctx, owner, parentID)
	if err != nil {
		return nil, err
	}
	if _, err := s.usableCheckpoint(ctx, owner, parentID, in.Body.Checkpoint); err != nil {
		return nil, err
	}
	cmdID := CommandID(ctx)
	id := uuid.NewSHA1(forkNamespace, cmdID[:])
	dir, err := s.workingDirectory(ctx, "", id)
	if err != nil {
		return nil, err
	}
	objective, name := parent.Objective, in.Body.Name
	if in.Body.Objective != "" {
		objective = in.Body.Objective
	}
	if name == "" {
		name = parent.Name + " (fork)"
		if r := []rune(name); len(r) > domain.MaxSessionNameChars {
			name = string(r[:domain.MaxSessionNameChars])
		}
	}
	policy := parent.ToolApproval
	data := command.StartSessionData{
		WorkingDirectory: dir, Objective: objective, Name: name, TemplateID: parent.TemplateID,
		SkillIDs: parent.EnabledSkillIDs, ModelID: parent.ModelID, BudgetCapUsd: parent.Budget.HardCapUsd,
		WarnAtPercent: parent.Budget.WarnAtPercent, ChainID: nil, ToolApproval: &policy,
		ForkedFrom: &domain.ForkPoint{SessionID: parentID, Turn: in.Body.Checkpoint, NewObjective: in.Body.Objective != ""},
	}
	if parent.TemplateID != nil {
		// The template's default skills come again from the template.
		data.SkillIDs = nil
	}
	raw, err := s.send(ctx, domain.AggregateSession, command.StartSession, id, data, startFields)
	if err != nil {
		return nil, err
	}
	res, err := decodeState[command.StartSessionResult](raw)
	if err != nil {
		return nil, err
	}
	out := &startSessionOutput{Location: "/api/agents/sessions/" + res.Session.ID.String()}
	out.Body = StartSessionResponse{Session: sessionDetailOf(res.Session), APIKey: res.APIKey}
	return out, nil
}

func (s *Server) rewindSession(ctx context.Context, in *rewindInput) (*sessionOutput, error) {
	owner, id, err := s.readOwned(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	if _, err := s.usableCheckpoint(ctx, owner, id, in.Body.Checkpoint); err != nil {
		return nil, err
	}
	return s.sessionCommand(ctx, in.ID, command.RewindSession, command.RewindData{Turn: in.Body.Checkpoint},
		map[string]string{"checkpoint": "checkpoint"})
}
