package claude_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/api"
	"github.com/agentbus/agentbus/internal/localserver"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/internal/uptest"
)

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// agentbusBinary builds the agentbus binary once per test run.
func agentbusBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := testenv.TempDir("bin")
		if err != nil {
			buildErr = err
			return
		}
		built = filepath.Join(dir, "agentbus")
		cmd := exec.Command("go", "build", "-o", built, "./cmd/agentbus")
		cmd.Dir = moduleRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return built
}

// upProcess is `agentbus up` as a user runs it, with the claude engine
// driving the real CLI against the world's scripted model.
type upProcess struct {
	*uptest.Client
	t     *testing.T
	args  []string
	env   []string
	log   *bytes.Buffer
	base  string
	token string
	redis *redis.Client
	cmd   *exec.Cmd
	done  chan struct{}
	// dataDir is up's data directory; natsPort and redisPort the ports of
	// its embedded NATS and private Redis.
	dataDir             string
	natsPort, redisPort int
	// owner is the user of token.
	owner string
}

const upSecret = "claude-up-test-secret"

func startUp(t *testing.T, w *world) *upProcess {
	t.Helper()
	bin := agentbusBinary(t)
	dataDir, err := testenv.TempDir("claude-up")
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			logResumeState(t, dataDir)
		}
	})
	port := func() int {
		p, err := localserver.FreePort()
		require.NoError(t, err)
		return p
	}
	httpAddr, redisPort, natsPort := fmt.Sprintf("127.0.0.1:%d", port()), port(), port()
	u := &upProcess{t: t, base: "http://" + httpAddr, log: &bytes.Buffer{}, dataDir: dataDir, natsPort: natsPort, redisPort: redisPort,
		args: []string{bin, "up", "--data-dir", dataDir, "--http", httpAddr, "--nats-port", fmt.Sprint(natsPort),
			"--nats-monitor-port", "0", "--database-url", testenv.PostgresURL(t), "--redis-port", fmt.Sprint(redisPort),
			"--redis-url", "", "--nats-url", ""},
		// What the README tells a user to give up for the claude engine.
		env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + w.home, "AGENTBUS_ENGINE=claude",
			"AGENTBUS_CLAUDE_BIN=" + cliBinary(t), "ANTHROPIC_BASE_URL=" + w.model.URL(), "ANTHROPIC_API_KEY=sk-ant-test-key",
			"AGENTBUS_JWT_SECRET=" + upSecret, "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"},
	}
	u.launch()
	u.owner = uuid.NewString()
	u.token, err = api.NewToken(upSecret, u.owner, time.Hour)
	require.NoError(t, err)
	u.redis = uptest.RedisOf(t, dataDir, 0)
	u.Client = &uptest.Client{T: t, Base: u.base, Token: u.token, Redis: u.redis, Wait: 2 * wait}
	return u
}

// logResumeState logs the CLI's conversation files under up's data
// directory dir and the sidecars' logs, so that a failed resume shows
// what the CLI had to resume from and what the sidecar saw.
func logResumeState(t *testing.T, dir string) {
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".jsonl") {
			info, _ := d.Info()
			b, _ := os.ReadFile(path)
			t.Logf("transcript %s: %d bytes, %d lines, modified %s", path, info.Size(), bytes.Count(b, []byte("\n")), info.ModTime().Format(time.StampMilli))
		}
		return nil
	})
	logs, _ := filepath.Glob(filepath.Join(dir, "log", "sidecars", "*"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		t.Logf("sidecar log %s:\n%s", l, b)
	}
}

func (u *upProcess) launch() {
	t := u.t
	t.Helper()
	u.cmd = exec.Command(u.args[0], u.args[1:]...)
	u.cmd.Env = u.env
	u.cmd.Stdout, u.cmd.Stderr = u.log, u.log
	require.NoError(t, u.cmd.Start())
	u.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(u.cmd, u.done)
	t.Cleanup(func() {
		_ = u.cmd.Process.Kill()
		<-u.done
	})
	require.Eventually(t, func() bool {
		resp, err := http.Get(u.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 90*time.Second, 100*time.Millisecond, "up did not become ready:\n%s", u.log)
}

// stop sends up SIGTERM, as Ctrl-C or a service manager does.
func (u *upProcess) stop() {
	u.t.Helper()
	require.NoError(u.t, u.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-u.done:
	case <-time.After(wait):
		u.t.Fatalf("up did not stop on SIGTERM:\n%s", u.log)
	}
}

// reviewAfter waits until the session's output awaits review after more
// than turns turns.
func (u *upProcess) reviewAfter(id string, turns int) {
	u.t.Helper()
	u.WaitFor(id, fmt.Sprintf("Idle awaiting review after %d turns", turns+1), func(s uptest.Session) bool {
		return s.Status == "Idle" && s.HasPendingReview && s.Metrics.TurnCount > turns
	})
}

// sidecarPID returns the pid of the session's running sidecar, 0 if none.
func (u *upProcess) sidecarPID(id string) int { return u.SidecarPIDs()[id] }

// TestClaudeSessionLivesAcrossTurnsAndRestartsThroughUp runs a claude
// session through `agentbus up` as a user starts it, with the real CLI:
// follow-ups to the Idle session, a restart of up in between, and the
// scripted model seeing the whole conversation after it.
func TestClaudeSessionLivesAcrossTurnsAndRestartsThroughUp(t *testing.T) {
	w := newWorld(t,
		reply{match: userSaid("Remember the word kumquat."), blocks: []block{text("Noted: kumquat.")}},
		reply{match: userSaid("Now say goodbye."), blocks: []block{text("Goodbye.")}},
		reply{
			match: func(r modelRequest) error {
				for _, earlier := range []string{"Remember the word kumquat.", "Noted: kumquat.", "Now say goodbye.", "Goodbye."} {
					if !strings.Contains(r.allText(), earlier) {
						return fmt.Errorf("the conversation after the restart lacks %q", earlier)
					}
				}
				return userSaid("Which word was it?")(r)
			},
			blocks: []block{text("The word was kumquat.")},
		},
		reply{
			match: func(r modelRequest) error {
				if !strings.Contains(r.allText(), "The word was kumquat.") {
					return fmt.Errorf("the conversation after the crash lacks the answer before it")
				}
				return userSaid("Spell it.")(r)
			},
			blocks: []block{text("K-U-M-Q-U-A-T.")},
		},
	)
	u := startUp(t, w)
	var started struct {
		Session uptest.Session `json:"session"`
	}
	u.Must(http.MethodPost, "/api/agents/sessions", map[string]any{"workingDirectory": "kumquat",
		"objective": "Remember the word kumquat.", "budgetCapUsd": 5}, &started)
	id := started.Session.ID
	u.reviewAfter(id, 0)
	first := u.sidecarPID(id)
	require.NotZero(t, first)

	u.FollowUp(id, "Now say goodbye.", "Immediate")
	assert.Equal(t, first, u.sidecarPID(id), "one sidecar, one CLI served both turns")

	u.stop()
	assert.Empty(t, uptest.ProcessesNaming(id), "no sidecar of the session is left once up stopped")
	assert.Empty(t, uptest.ProcessesNamingIn("--permission-prompt-tool", u.dataDir), "no CLI is left once up stopped")

	u.launch()
	require.Eventually(t, func() bool { p := u.sidecarPID(id); return p != 0 && p != first }, 2*wait, 50*time.Millisecond,
		"the sidecar was not started again:\n%s", u.log)
	u.FollowUp(id, "Which word was it?", "Queued")

	// A sidecar killed outright is started again and resumes the CLI's
	// conversation too.
	second := u.sidecarPID(id)
	require.NoError(t, syscall.Kill(second, syscall.SIGKILL))
	require.Eventually(t, func() bool { p := u.sidecarPID(id); return p != 0 && p != second }, 2*wait, 50*time.Millisecond,
		"the killed sidecar was not started again:\n%s", u.log)
	u.FollowUp(id, "Spell it.", "Immediate")
	assert.Zero(t, w.model.remaining(), "the model answered every scripted turn")

	u.Must(http.MethodPost, "/api/agents/sessions/"+id+"/cancel", nil, nil)
	u.WaitFor(id, "Cancelled", func(s uptest.Session) bool { return s.Status == "Cancelled" })
	require.Eventually(t, func() bool { return len(uptest.ProcessesNaming(id)) == 0 }, wait, 50*time.Millisecond,
		"the cancelled session's sidecar is gone")
	u.stop()
}
