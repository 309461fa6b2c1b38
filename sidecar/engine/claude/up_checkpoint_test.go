package claude_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/internal/uptest"
	"github.com/agentbus/agentbus/sidecar/checkpoint"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// The working directory after each turn of the files scenario, and the
// command that turns the one before into it.
var (
	filesAfterTurn = map[int]map[string]string{
		1: {"README.md": "# Project\n\nturn one\n", "src/main.go": "package main\n"},
		2: {"README.md": "# Project\n\nturn two\n", "src/main.go": "package main\n", "pkg/util.go": "package pkg\n"},
		3: {"README.md": "# Project\n\nturn three\n", "pkg/util.go": "package pkg\n", "cmd/app.go": "package main\n"},
	}
	turnCommand = map[int]string{
		1: `mkdir -p src && printf '# Project\n\nturn one\n' > README.md && printf 'package main\n' > src/main.go && echo turn-one-done`,
		2: `mkdir -p pkg && printf '# Project\n\nturn two\n' > README.md && printf 'package pkg\n' > pkg/util.go && echo turn-two-done`,
		3: `rm -r src && mkdir -p cmd && printf '# Project\n\nturn three\n' > README.md && printf 'package main\n' > cmd/app.go && echo turn-three-done`,
	}
	turnAnswer = map[int]string{1: "Created the project (turn one).", 2: "Added a package (turn two).", 3: "Replaced main (turn three)."}
	turnAsk    = map[int]string{1: "Build the project.", 2: "Add a package.", 3: "Replace main."}
)

// filesTurn is the scripted model's two replies of turn n: a shell command
// that changes the files, then a text once its result came.
func filesTurn(n int) []reply {
	id := fmt.Sprintf("toolu_turn%d", n)
	return []reply{
		{match: userSaid(turnAsk[n]), blocks: []block{toolUse(id, "Bash", bash(turnCommand[n]))}},
		{match: toolResultIs(id, "done", false), blocks: []block{text(turnAnswer[n])}},
	}
}

// conversation is a request's messages as the test compares them: each
// message's role and blocks (texts, tool calls and results), without the
// CLI's system reminders, which restate the environment of each request.
func conversation(r modelRequest) []string {
	var out []string
	for _, m := range r.Messages {
		var b strings.Builder
		b.WriteString(m.Role + ":")
		for _, c := range m.blocks() {
			switch c.Type {
			case "text":
				if !strings.HasPrefix(strings.TrimSpace(c.Text), "<system-reminder>") {
					b.WriteString(" text " + c.Text)
				}
			case "tool_use":
				b.WriteString(" tool_use " + c.ID)
			case "tool_result":
				b.WriteString(" tool_result " + c.ToolUseID + " " + resultText(c.Content))
			}
		}
		out = append(out, b.String())
	}
	return out
}

// before returns the conversation of a request that asks a new question:
// everything but its last (the question's) message.
func before(t *testing.T, r modelRequest) []string {
	t.Helper()
	c := conversation(r)
	require.NotEmpty(t, c)
	require.True(t, strings.HasPrefix(c[len(c)-1], "user:"), "the request ends with the question: %v", c)
	return c[:len(c)-1]
}

// TestClaudeForkAndRewindGoBackToATurnsFilesAndConversationThroughUp runs a
// claude session of three turns that each change files through `up` and
// its real runtime, with the real CLI, forks it at turn 1 and rewinds it
// to turn 2: each goes on from its turn's files and, in the model's
// request log, from exactly its turn's conversation.
func TestClaudeForkAndRewindGoBackToATurnsFilesAndConversationThroughUp(t *testing.T) {
	var script []reply
	for n := 1; n <= 3; n++ {
		script = append(script, filesTurn(n)...)
	}
	script = append(script,
		reply{match: userSaid("Which turn is this?"), blocks: []block{text("The fork goes on after turn one.")}},
		reply{match: userSaid("Where are we now?"), blocks: []block{text("Rewound to turn two.")}})
	w := newWorld(t, script...)
	u := startUp(t, w)
	id := u.Start(turnAsk[1], map[string]any{"workingDirectory": "project"})
	dir := filepath.Join(u.dataDir, "workspace", u.owner, "project")
	u.WaitReview(id)
	// firstOfTurn holds the index in the model's log of the request that
	// asked each turn's question.
	firstOfTurn := map[int]int{1: 0}
	for n := 2; n <= 3; n++ {
		firstOfTurn[n] = len(w.model.mainRequests())
		u.FollowUp(id, turnAsk[n], "Queued")
	}
	assert.Equal(t, filesAfterTurn[3], uptest.DirFiles(t, dir))
	var cps []checkpointItem
	require.Eventually(t, func() bool { cps = checkpoints(u, id); return len(cps) == 3 }, wait, 50*time.Millisecond, "three checkpoints")
	parentEnd := conversation(w.model.mainRequests()[len(w.model.mainRequests())-1])

	t.Run("a fork at turn 1 holds turn 1's files and exactly its conversation", func(t *testing.T) {
		var started struct {
			Session struct {
				ID               string `json:"id"`
				WorkingDirectory string `json:"workingDirectory"`
			} `json:"session"`
		}
		u.Must(http.MethodPost, "/api/agents/sessions/"+id+"/fork", map[string]any{"checkpoint": 1}, &started)
		fork := started.Session
		u.WaitStatus(fork.ID, "Idle")
		assert.Equal(t, filesAfterTurn[1], uptest.DirFiles(t, fork.WorkingDirectory))
		asked := len(w.model.mainRequests())
		u.FollowUp(fork.ID, "Which turn is this?", "Queued")
		reqs := w.model.mainRequests()
		require.Greater(t, len(reqs), asked)
		assert.Equal(t, before(t, reqs[firstOfTurn[2]]), before(t, reqs[asked]),
			"the fork's first request carries the conversation up to turn 1, no more, no less")
		assert.Equal(t, filesAfterTurn[3], uptest.DirFiles(t, dir), "the parent's files are untouched")
		assert.Len(t, checkpoints(u, id), 3, "the parent's checkpoints are its own")
	})

	t.Run("a rewind to turn 2 restores its files and exactly its conversation", func(t *testing.T) {
		u.Must(http.MethodPost, "/api/agents/sessions/"+id+"/rewind", map[string]any{"checkpoint": 2}, nil)
		require.Eventually(t, func() bool { return assert.ObjectsAreEqual(filesAfterTurn[2], uptest.DirFiles(t, dir)) },
			wait, 50*time.Millisecond, "the files after the rewind")
		require.Eventually(t, func() bool { return len(checkpoints(u, id)) == 4 }, wait, 50*time.Millisecond,
			"the restored state is a checkpoint")
		asked := len(w.model.mainRequests())
		u.FollowUp(id, "Where are we now?", "Queued")
		reqs := w.model.mainRequests()
		require.Greater(t, len(reqs), asked)
		got := before(t, reqs[asked])
		assert.Equal(t, before(t, reqs[firstOfTurn[3]]), got,
			"the rewound session's next request carries the conversation up to turn 2, not turn 3")
		assert.NotContains(t, strings.Join(got, "\n"), turnAnswer[3])
		assert.Less(t, len(got), len(parentEnd))
	})
	assert.Zero(t, w.model.remaining(), "the model answered every scripted reply")
	u.stop()
}

type checkpointItem struct {
	Turn     int    `json:"turn"`
	Snapshot string `json:"snapshot"`
	Tree     string `json:"tree"`
}

func checkpoints(u *upProcess, id string) []checkpointItem {
	u.t.Helper()
	var out struct {
		Items []checkpointItem `json:"items"`
	}
	u.Must(http.MethodGet, "/api/agents/sessions/"+id+"/checkpoints", nil, &out)
	return out.Items
}

// TestARewoundPausedSessionStaysPausedUntilResumed pauses a claude session
// in its second turn and rewinds it to the first through `up`: the
// sidecar started again keeps the session Paused, and once resumed the
// session goes Idle and on from turn 1's conversation.
func TestARewoundPausedSessionStaysPausedUntilResumed(t *testing.T) {
	w := newWorld(t,
		reply{match: userSaid("Remember the word kumquat."), blocks: []block{text("Noted: kumquat.")}},
		reply{match: userSaid("Build it."), blocks: []block{toolUse("toolu_build", "Bash", bash("sleep 2; echo built"))}},
		// The pause holds the agent at the safe point before a tool runs:
		// before the build, or, when the build started first, before the
		// next tool. The rewind cuts the turn short there.
		reply{only: func(r modelRequest) bool { _, ok := r.toolResult("toolu_build"); return ok },
			match: toolResultIs("toolu_build", "built", false), blocks: []block{toolUse("toolu_ship", "Bash", bash("echo shipped"))}},
		reply{match: all(userSaid("Which word was it?"), func(r modelRequest) error {
			if strings.Contains(r.allText(), "Build it.") {
				return fmt.Errorf("the rewound conversation holds the turn after its checkpoint")
			}
			return conversationHolds("Remember the word kumquat.", "Noted: kumquat.")(r)
		}), blocks: []block{text("The word was kumquat.")}})
	u := startUp(t, w)
	id := u.Start("Remember the word kumquat.", nil)
	u.WaitReview(id)
	u.WaitDelivered(id, u.Enqueue(id, "Build it.", "Queued"))
	u.WaitActivity(id, "sleep 2")
	pid := u.SidecarPID(id)
	u.Post(id, "pause", nil)
	u.WaitStatus(id, "Paused")

	store := checkpoint.Store{Dir: filepath.Join(u.dataDir, "checkpoints", id+".git")}
	before, err := store.Head(context.Background())
	require.NoError(t, err)
	u.Post(id, "rewind", map[string]any{"checkpoint": 1})
	u.NewSidecarPID(id, pid)
	// The sidecar started again has taken its checkpoint of the restored
	// state: it writes that turn's end at once unless it is paused.
	require.Eventually(t, func() bool { head, err := store.Head(context.Background()); return err == nil && head != before },
		wait, 20*time.Millisecond, "the restored state's snapshot")
	assert.Equal(t, "Paused", u.Session(id).Status, "the rewound session is still paused")

	u.Post(id, "resume", nil)
	u.WaitStatus(id, "Idle")
	// The sidecar started again was paused: it ended the turn left open
	// only after its resume was acknowledged.
	assert.Equal(t, []string{protocol.EventSessionStarted, protocol.EventResumeAck, protocol.EventTurnCompleted},
		lastSidecarsEvents(t, u, id, protocol.EventSessionStarted, protocol.EventResumeAck, protocol.EventTurnCompleted))
	require.Eventually(t, func() bool { return len(checkpoints(u, id)) == 2 }, wait, 50*time.Millisecond,
		"the restored state is a checkpoint once resumed")
	u.FollowUp(id, "Which word was it?", "Queued")
	assert.Zero(t, w.model.remaining(), "the model answered every scripted reply")
	u.stop()
}

// lastSidecarsEvents returns the types among types of the events the
// session's last sidecar wrote, from its session_started on, in order.
func lastSidecarsEvents(t *testing.T, u *upProcess, id string, types ...string) []string {
	t.Helper()
	entries, err := u.redis.XRange(context.Background(), protocol.EventsKey(id), "-", "+").Result()
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		typ, _ := e.Values[protocol.FieldType].(string)
		if typ == protocol.EventSessionStarted {
			out = nil
		}
		if slices.Contains(types, typ) {
			out = append(out, typ)
		}
	}
	return out
}
