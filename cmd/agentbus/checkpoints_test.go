package main

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/uptest"
)

// The working directory after each turn of the files scenario.
var filesAfterTurn = map[int]map[string]string{
	1: {"README.md": "# Project\n\nturn one\n", "src/main.go": "package main\n\nfunc main() {}\n"},
	2: {"README.md": "# Project\n\nturn two\n", "src/main.go": "package main\n\nfunc main() {}\n", "pkg/util.go": "package pkg\n"},
	3: {"README.md": "# Project\n\nturn three\n", "pkg/util.go": "package pkg\n", "cmd/app.go": "package main\n"},
}

type checkpointItem struct {
	Turn         int    `json:"turn"`
	FilesChanged int    `json:"filesChanged"`
	LastMessage  string `json:"lastMessage"`
	Rewound      bool   `json:"rewound"`
	Snapshot     string `json:"snapshot"`
	Tree         string `json:"tree"`
	Pruned       bool   `json:"pruned"`
	Bytes        int64  `json:"bytes"`
	AddedBytes   int64  `json:"addedBytes"`
}

func (u *upUnderTest) checkpoints(id string) []checkpointItem {
	u.t.Helper()
	var out struct {
		Items []checkpointItem `json:"items"`
	}
	u.Must(http.MethodGet, "/api/agents/sessions/"+id+"/checkpoints", nil, &out)
	return out.Items
}

// waitFiles waits until dir holds exactly want.
func (u *upUnderTest) waitFiles(dir string, want map[string]string, what string) {
	u.t.Helper()
	require.Eventually(u.t, func() bool { return assert.ObjectsAreEqual(want, uptest.DirFiles(u.t, dir)) }, 2*wait, 50*time.Millisecond,
		"%s: %s holds %v", what, dir, uptest.DirFiles(u.t, dir))
}

type sessionWithDir struct {
	ID               string `json:"id"`
	Status           string `json:"status"`
	WorkingDirectory string `json:"workingDirectory"`
	ForkedFrom       *struct {
		SessionID  string `json:"sessionId"`
		Checkpoint int    `json:"checkpoint"`
	} `json:"forkedFrom"`
}

// TestForkAndRewindGoBackToATurnsFilesAndConversation runs a session of
// three turns that each change files through `up` and its real runtime,
// forks it at turn 1 and rewinds it to turn 2.
func TestForkAndRewindGoBackToATurnsFilesAndConversation(t *testing.T) {
	u := startUpWithRuntime(t)
	dir := filepath.Join(u.workspace, u.owner, "project-"+uuid.NewString()[:8])
	id := u.start(map[string]any{"workingDirectory": dir, "objective": "Build the project [scenario:files]"})
	u.waitReview(id)
	u.waitFiles(dir, filesAfterTurn[3], "after three turns")

	var cps []checkpointItem
	require.Eventually(t, func() bool { cps = u.checkpoints(id); return len(cps) == 3 }, 2*wait, 50*time.Millisecond, "three checkpoints")
	for i, cp := range cps {
		assert.Equal(t, i+1, cp.Turn)
		assert.False(t, cp.Rewound)
		assert.Len(t, cp.Snapshot, 40)
	}
	assert.Equal(t, []int{2, 2, 3}, []int{cps[0].FilesChanged, cps[1].FilesChanged, cps[2].FilesChanged})
	assert.Equal(t, "Created the project (turn one).", cps[0].LastMessage)
	assert.Equal(t, "Replaced main (turn three).", cps[2].LastMessage)

	t.Run("a fork at turn 1 holds turn 1's files and goes on from its conversation", func(t *testing.T) {
		var started struct {
			Session sessionWithDir `json:"session"`
		}
		u.Must(http.MethodPost, "/api/agents/sessions/"+id+"/fork", map[string]any{"checkpoint": 1}, &started)
		fork := started.Session
		require.NotNil(t, fork.ForkedFrom)
		assert.Equal(t, id, fork.ForkedFrom.SessionID)
		assert.Equal(t, 1, fork.ForkedFrom.Checkpoint)
		assert.NotEqual(t, dir, fork.WorkingDirectory, "a new directory")
		u.waitStatus(fork.ID, "Idle")
		assert.Equal(t, filesAfterTurn[1], uptest.DirFiles(t, fork.WorkingDirectory))
		assert.Equal(t, filesAfterTurn[3], uptest.DirFiles(t, dir), "the parent is untouched")
		require.Eventually(t, func() bool {
			f := u.checkpoints(fork.ID)
			return len(f) == 1 && f[0].Turn == 1 && f[0].Tree == cps[0].Tree
		}, 2*wait, 50*time.Millisecond, "the fork's first checkpoint is the parent's turn 1")

		// The agent goes on from turn 1: its next turns are the scenario's
		// turns two and three, not the objective again.
		u.FollowUp(fork.ID, "Go on", "Queued")
		u.waitReview(fork.ID)
		u.waitFiles(fork.WorkingDirectory, filesAfterTurn[3], "the fork after its own turns two and three")
		assert.Contains(t, u.Activity(fork.ID), "Added a package (turn two).")
		assert.NotContains(t, u.Activity(fork.ID), "Created the project (turn one).", "turn one is not played again")
		assert.Equal(t, filesAfterTurn[3], uptest.DirFiles(t, dir), "the parent is untouched")
		assert.Len(t, u.checkpoints(id), 3, "the parent's checkpoints are its own")
	})

	t.Run("a rewind to turn 2 restores its files and conversation", func(t *testing.T) {
		var s sessionWithDir
		u.Must(http.MethodPost, "/api/agents/sessions/"+id+"/rewind", map[string]any{"checkpoint": 2}, &s)
		assert.Equal(t, "Idle", s.Status)
		u.waitFiles(dir, filesAfterTurn[2], "after the rewind")
		var after []checkpointItem
		require.Eventually(t, func() bool { after = u.checkpoints(id); return len(after) == 4 }, 2*wait, 50*time.Millisecond,
			"the restored state is a checkpoint")
		assert.Equal(t, []bool{false, true, true, false}, []bool{after[0].Rewound, after[1].Rewound, after[2].Rewound, after[3].Rewound})
		assert.Equal(t, 2, after[3].Turn)
		assert.Equal(t, cps[1].Tree, after[3].Tree)
		// Turn three stays in the activity, marked rewound; turn two is not.
		var activity struct {
			Items []struct {
				Summary string `json:"summary"`
				Rewound bool   `json:"rewound"`
			} `json:"items"`
		}
		u.Must(http.MethodGet, "/api/agents/sessions/"+id+"/activity?limit=1000", nil, &activity)
		rewound := map[string]bool{}
		for _, it := range activity.Items {
			rewound[it.Summary] = it.Rewound
		}
		require.Contains(t, rewound, "Replaced main (turn three).")
		assert.True(t, rewound["Replaced main (turn three)."])
		assert.False(t, rewound["Added a package (turn two)."])

		// The agent resumes after turn 2: a follow-up brings turn three again.
		u.FollowUp(id, "Go on", "Queued")
		u.waitFiles(dir, filesAfterTurn[3], "turn three again")
		require.Eventually(t, func() bool {
			c := u.checkpoints(id)
			return len(c) >= 6 && c[len(c)-1].Turn == 4
		}, 2*wait, 50*time.Millisecond, "the reply and turn three are turns 3 and 4")
	})

	t.Run("the command line lists, forks and rewinds", func(t *testing.T) {
		c := &cliUnderTest{t: t, bin: buildAgentbus(t), api: u.base, token: u.token}
		u.waitReview(id)
		list := c.must("sessions", "checkpoints", id)
		assert.Contains(t, list, "3 (rewound)")
		assert.Contains(t, list, "Replaced main (turn three).")
		fork := c.id("sessions", "fork", id, "1")
		u.waitStatus(fork, "Idle")
		var s sessionWithDir
		u.Must(http.MethodGet, "/api/agents/sessions/"+fork, nil, &s)
		assert.Equal(t, filesAfterTurn[1], uptest.DirFiles(t, s.WorkingDirectory))

		c.must("sessions", "rewind", id, "1")
		u.waitFiles(dir, filesAfterTurn[1], "after the rewind to turn 1")
		c.fails(3, "checkpoint", "sessions", "rewind", id, "9")
		c.fails(2, "TURN", "sessions", "fork", id, "one")
	})

	t.Run("invalid requests", func(t *testing.T) {
		base := "/api/agents/sessions/" + id
		assert.Equal(t, http.StatusNotFound, u.Call(http.MethodPost, base+"/fork", map[string]any{"checkpoint": 9}, nil))
		assert.Equal(t, http.StatusNotFound, u.Call(http.MethodPost, base+"/rewind", map[string]any{"checkpoint": 9}, nil))
		assert.Equal(t, http.StatusUnprocessableEntity, u.Call(http.MethodPost, base+"/fork", map[string]any{"checkpoint": -1}, nil))
		assert.Equal(t, http.StatusUnprocessableEntity, u.Call(http.MethodPost, base+"/rewind", map[string]any{}, nil))
		missing := "/api/agents/sessions/" + uuid.NewString()
		assert.Equal(t, http.StatusNotFound, u.Call(http.MethodPost, missing+"/fork", map[string]any{"checkpoint": 1}, nil))
		assert.Equal(t, http.StatusNotFound, u.Call(http.MethodGet, missing+"/checkpoints", nil, nil))
		// Another owner's session, with checkpoints of its own, is not
		// there for this owner.
		otherID, _ := u.OtherOwnerSession(runtimeSecret, u.workspace, "not yours")
		other := "/api/agents/sessions/" + otherID
		assert.Equal(t, http.StatusNotFound, u.Call(http.MethodGet, other+"/checkpoints", nil, nil))
		assert.Equal(t, http.StatusNotFound, u.Call(http.MethodPost, other+"/fork", map[string]any{"checkpoint": 1}, nil))
		assert.Equal(t, http.StatusNotFound, u.Call(http.MethodPost, other+"/rewind", map[string]any{"checkpoint": 1}, nil))

		u.waitReview(id)
		u.Must(http.MethodPost, base+"/approve", nil, nil)
		u.waitStatus(id, "Completed")
		var problem map[string]any
		assert.Equal(t, http.StatusConflict, u.Call(http.MethodPost, base+"/rewind", map[string]any{"checkpoint": 1}, &problem))
		assert.Equal(t, "Completed", problem["currentStatus"], "%v", problem)
		// A completed session can still be forked: its checkpoints stay.
		var started struct {
			Session sessionWithDir `json:"session"`
		}
		u.Must(http.MethodPost, base+"/fork", map[string]any{"checkpoint": 2, "objective": "Then replace main"}, &started)
		u.waitReview(started.Session.ID)
		u.waitFiles(started.Session.WorkingDirectory, filesAfterTurn[3], "a fork with an objective runs it from turn 2")
	})
}

// TestRetentionKeepsTheNewestCheckpointsAndShowsTheirStorage runs a
// session of four turns through `up` with AGENTBUS_CHECKPOINT_KEEP=2: the
// list keeps turns 3 and 4 and says turns 1 and 2 are pruned, their
// snapshots are gone from the store, fork and rewind to them answer 409,
// and the sizes of each checkpoint and of the store are shown.
func TestRetentionKeepsTheNewestCheckpointsAndShowsTheirStorage(t *testing.T) {
	t.Setenv("AGENTBUS_CHECKPOINT_KEEP", "2")
	u := startUpWithRuntime(t)
	dir := filepath.Join(u.workspace, u.owner, "project-"+uuid.NewString()[:8])
	id := u.start(map[string]any{"workingDirectory": dir, "objective": "Build the project [scenario:files]"})
	u.waitReview(id)
	u.FollowUp(id, "Go on", "Queued")
	var list struct {
		Items      []checkpointItem `json:"items"`
		Kept       int              `json:"kept"`
		StoreBytes int64            `json:"storeBytes"`
	}
	require.Eventually(t, func() bool {
		u.Must(http.MethodGet, "/api/agents/sessions/"+id+"/checkpoints", nil, &list)
		return len(list.Items) == 4
	}, 2*wait, 50*time.Millisecond, "four checkpoints")
	pruned := []bool{}
	for _, cp := range list.Items {
		pruned = append(pruned, cp.Pruned)
	}
	assert.Equal(t, []bool{true, true, false, false}, pruned)
	assert.Equal(t, 2, list.Kept)
	size := 0
	for _, content := range filesAfterTurn[3] {
		size += len(content)
	}
	assert.Equal(t, int64(size), list.Items[2].Bytes, "turn 3's files")
	assert.Equal(t, int64(len(filesAfterTurn[3]["README.md"])+len(filesAfterTurn[3]["cmd/app.go"])), list.Items[2].AddedBytes,
		"turn 3 changed README.md and added cmd/app.go")
	assert.Positive(t, list.StoreBytes)

	store := filepath.Join(u.dataDir, "checkpoints", id+".git")
	refs, err := os.ReadDir(filepath.Join(store, "refs", "snapshots"))
	require.NoError(t, err)
	assert.Len(t, refs, 2, "the store keeps two snapshots")
	for _, cp := range list.Items[:2] {
		_, err := os.Stat(filepath.Join(store, "objects", cp.Snapshot[:2], cp.Snapshot[2:]))
		assert.True(t, os.IsNotExist(err), "turn %d's snapshot is gone from the store", cp.Turn)
	}

	base := "/api/agents/sessions/" + id
	var problem map[string]any
	assert.Equal(t, http.StatusConflict, u.Call(http.MethodPost, base+"/fork", map[string]any{"checkpoint": 1}, &problem))
	assert.Contains(t, problem["detail"], "pruned")
	assert.Equal(t, http.StatusConflict, u.Call(http.MethodPost, base+"/rewind", map[string]any{"checkpoint": 2}, &problem))
	assert.Contains(t, problem["detail"], "pruned")

	c := &cliUnderTest{t: t, bin: buildAgentbus(t), api: u.base, token: u.token}
	out := c.must("sessions", "checkpoints", id)
	assert.Contains(t, out, "1 (pruned)")
	assert.Contains(t, out, "2 of 4 kept, store ")

	u.waitReview(id)
	var s sessionWithDir
	u.Must(http.MethodPost, base+"/rewind", map[string]any{"checkpoint": 3}, &s)
	u.waitFiles(dir, filesAfterTurn[3], "a kept checkpoint rewinds")
}

// TestADiffOfTwoCheckpointsShowsTheFilesAndTheirChanges runs the files
// scenario through `up` and compares its turns 1 and 3 over the API and
// the command line, and answers invalid requests with a problem.
func TestADiffOfTwoCheckpointsShowsTheFilesAndTheirChanges(t *testing.T) {
	u := startUpWithRuntime(t)
	dir := filepath.Join(u.workspace, u.owner, "project-"+uuid.NewString()[:8])
	id := u.start(map[string]any{"workingDirectory": dir, "objective": "Build the project [scenario:files]"})
	u.waitReview(id)
	require.Eventually(t, func() bool { return len(u.checkpoints(id)) == 3 }, 2*wait, 50*time.Millisecond, "three checkpoints")

	type fileDiff struct {
		Path     string `json:"path"`
		Status   string `json:"status"`
		OldBytes int64  `json:"oldBytes"`
		NewBytes int64  `json:"newBytes"`
		Patch    string `json:"patch"`
	}
	var diff struct {
		From  int        `json:"from"`
		To    int        `json:"to"`
		Files []fileDiff `json:"files"`
	}
	base := "/api/agents/sessions/" + id + "/checkpoints/diff"
	u.Must(http.MethodGet, base+"?from=1&to=3", nil, &diff)
	assert.Equal(t, 1, diff.From)
	assert.Equal(t, 3, diff.To)
	one, three := filesAfterTurn[1], filesAfterTurn[3]
	assert.Equal(t, []fileDiff{
		{Path: "README.md", Status: "changed", OldBytes: int64(len(one["README.md"])), NewBytes: int64(len(three["README.md"])),
			Patch: "@@ -1,3 +1,3 @@\n # Project\n \n-turn one\n+turn three\n"},
		{Path: "cmd/app.go", Status: "added", NewBytes: int64(len(three["cmd/app.go"])), Patch: "@@ -0,0 +1 @@\n+package main\n"},
		{Path: "pkg/util.go", Status: "added", NewBytes: int64(len(three["pkg/util.go"])), Patch: "@@ -0,0 +1 @@\n+package pkg\n"},
		{Path: "src/main.go", Status: "removed", OldBytes: int64(len(one["src/main.go"])),
			Patch: "@@ -1,3 +0,0 @@\n-package main\n-\n-func main() {}\n"},
	}, diff.Files)
	u.Must(http.MethodGet, base+"?from=3&to=3", nil, &diff)
	assert.Empty(t, diff.Files)

	c := &cliUnderTest{t: t, bin: buildAgentbus(t), api: u.base, token: u.token}
	out := c.must("sessions", "diff", id, "1", "2")
	assert.Contains(t, out, "added")
	assert.Contains(t, out, "pkg/util.go")
	assert.Contains(t, out, "+turn two")
	c.fails(2, "TURN", "sessions", "diff", id, "one", "2")

	var problem map[string]any
	for query, status := range map[string]int{"from=x&to=1": 422, "from=-1&to=1": 422, "from=1": 422, "from=1&to=9": 404} {
		assert.Equal(t, status, u.Call(http.MethodGet, base+"?"+query, nil, &problem), query)
	}
	assert.Equal(t, http.StatusNotFound, u.Call(http.MethodGet, "/api/agents/sessions/"+uuid.NewString()+"/checkpoints/diff?from=1&to=2", nil, nil))
	otherID, _ := u.OtherOwnerSession(runtimeSecret, u.workspace, "not yours")
	assert.Equal(t, http.StatusNotFound, u.Call(http.MethodGet, "/api/agents/sessions/"+otherID+"/checkpoints/diff?from=1&to=1", nil, nil))
}
