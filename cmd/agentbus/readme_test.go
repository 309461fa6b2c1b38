package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestREADMEWalkthrough runs the README's "A session, by hand" as a shell
// script against `up` and its real runtime, as a new user pastes it: the
// token is the one up's user has, the live stream runs in the background
// instead of another shell, and every other line is taken as written. It
// runs at full speed, and at a person's pace (a pause after every
// command), since each wait must hold for what it waits on however long
// the person takes.
func TestREADMEWalkthrough(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	doc := string(raw)
	i := strings.Index(doc, "## A session, by hand")
	require.Positive(t, i)
	block := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(doc[i:])
	require.NotNil(t, block)

	bin := buildAgentbus(t)
	for _, pace := range []time.Duration{0, 1500 * time.Millisecond} {
		// A new user each time, on a new deployment: the walkthrough
		// creates things with names of its own.
		t.Run(fmt.Sprint("pace ", pace), func(t *testing.T) { runWalkthrough(t, startUpWithRuntime(t), bin, block[1], pace) })
	}
}

// runWalkthrough runs the walkthrough's block, waiting pace after each
// command as a person reading the next one would.
func runWalkthrough(t *testing.T, u *upUnderTest, bin, block string, pace time.Duration) {
	stream := filepath.Join(t.TempDir(), "stream.out")
	watch := filepath.Join(t.TempDir(), "watch.out")
	var script []string
	streamed, watched := false, false
	for _, line := range strings.Split(block, "\n") {
		command := strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "#") && !strings.HasSuffix(line, "\\")
		switch {
		case strings.HasPrefix(line, "export TOKEN="):
			line = "export TOKEN=" + u.token
		case strings.HasPrefix(line, "curl -N "):
			line = "timeout 120 " + line + " > " + stream + " 2>&1 &"
			streamed = true
		case strings.HasPrefix(line, "bin/agentbus sessions watch "):
			line = "timeout 120 " + line + " > " + watch + " 2>&1 &"
			watched = true
		}
		script = append(script, strings.ReplaceAll(line, "localhost:8080", strings.TrimPrefix(u.base, "http://")))
		if command && pace > 0 {
			script = append(script, fmt.Sprintf("sleep %.1f", pace.Seconds()))
		}
	}
	require.True(t, streamed, "the walkthrough follows the session live")
	require.True(t, watched, "the walkthrough follows the session live with the command line")

	ctx, cancel := context.WithTimeout(context.Background(), 4*wait+time.Duration(len(script))*pace)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", strings.Join(script, "\n")+"\n")
	// The script runs where a user who ran `make run` is: in a checkout
	// with bin/agentbus, the PATH as it was (agentbus is not on it).
	checkout := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(checkout, "bin"), 0o755))
	require.NoError(t, os.Symlink(bin, filepath.Join(checkout, "bin", "agentbus")))
	cmd.Dir = checkout
	cmd.Env = append(os.Environ(), "PATH="+pathWithout("agentbus"))
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the walkthrough failed:\n%s", out)
	assert.Contains(t, string(out), `"Completed"`, "the approved session is Completed:\n%s", out)
	assert.Contains(t, string(out), `"Cancelling"`, "the long session is cancelled:\n%s", out)

	require.Eventually(t, func() bool {
		got, _ := os.ReadFile(stream)
		return strings.Contains(string(got), "agent_session_output_ready")
	}, wait, 100*time.Millisecond, "the live stream showed no output of the session")
	got, err := os.ReadFile(stream)
	require.NoError(t, err)
	for _, ev := range []string{"session_input_received", "agent_session_approved"} {
		assert.Contains(t, string(got), ev, "the live stream shows the session's events")
	}

	// The command line's steps: the session's table row, its approval,
	// the refused second approval, and the watch that ended with it.
	assert.Regexp(t, `(?m)^[0-9a-f-]{36}\s+Pick a database \[scenario:question\]\s+Completed\s`, string(out))
	assert.Regexp(t, `(?m)^Question\s+Which database should the service use\? \[PostgreSQL \| SQLite\]$`, string(out))
	assert.Regexp(t, `(?m)^[0-9a-f-]{36} Completed$`, string(out))
	assert.Contains(t, string(out), "exit code 4")
	require.Eventually(t, func() bool {
		got, _ := os.ReadFile(watch)
		return strings.HasSuffix(string(got), "● agent session approved\n")
	}, wait, 100*time.Millisecond, "watch did not end with the approved session")
	got, err = os.ReadFile(watch)
	require.NoError(t, err)
	for _, line := range []string{"assistant  Going with PostgreSQL.", "● session input received answer=PostgreSQL"} {
		assert.Contains(t, string(got), line, "watch shows the session's events")
	}

	// Tool approval, templates and skills from the command line.
	assert.Regexp(t, `(?m)^Permission\s+Bash \$ rm -rf build/ \(request [0-9a-f-]+; Deny at \d\d:\d\d:\d\d unless decided\)$`, string(out))
	assert.Regexp(t, `(?m)^Tool approval\s+every tool \(waits 120s, then Deny\)$`, string(out))
	assert.Regexp(t, `(?m)^[0-9a-f-]{36} version 2$`, string(out))
}

// pathWithout is $PATH without the directories that hold program: the
// PATH of a new user, who has not installed it.
func pathWithout(program string) string {
	var dirs []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(dir, program)); err != nil {
			dirs = append(dirs, dir)
		}
	}
	return strings.Join(dirs, string(os.PathListSeparator))
}
