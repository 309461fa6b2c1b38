package sandbox_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/sidecar/sandbox"
)

// host is a data directory laid out as agentbus lays it out: a server
// secret, an owner's session directory beside another owner's, and the
// session's sandbox state.
type host struct {
	data, work, sibling, state string
}

func newHost(t *testing.T) host {
	t.Helper()
	data := t.TempDir()
	return newHostIn(t, data)
}

func newHostIn(t *testing.T, data string) host {
	t.Helper()
	h := host{data: data, work: filepath.Join(data, "workspace", "owner-a", "session-1"),
		sibling: filepath.Join(data, "workspace", "owner-b", "src"), state: filepath.Join(data, "sandboxes", "session-1")}
	require.NoError(t, os.WriteFile(filepath.Join(data, "jwt-secret"), []byte("server-secret"), 0o600))
	require.NoError(t, os.MkdirAll(h.work, 0o755))
	require.NoError(t, os.MkdirAll(h.sibling, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(h.sibling, "main.go"), []byte("other owner's code"), 0o644))
	return h
}

// run runs script with sh inside the sandbox of h and returns its output
// and exit error.
func run(t *testing.T, s *sandbox.Sandbox, h host, spec sandbox.Spec, script string) (string, error) {
	t.Helper()
	return runAs(t, s, h, spec, script, nil)
}

func runAs(t *testing.T, s *sandbox.Sandbox, h host, spec sandbox.Spec, script string, cred *syscall.Credential) (string, error) {
	t.Helper()
	spec.Dir, spec.State = h.work, h.state
	argv, err := s.Command(spec, "/bin/sh", "-c", script)
	require.NoError(t, err)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, sandbox.Env()...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: cred}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func newSandbox(t *testing.T, cfg sandbox.Config) *sandbox.Sandbox {
	t.Helper()
	s, err := sandbox.New(cfg)
	require.NoError(t, err)
	require.NoError(t, s.Check(context.Background()))
	return s
}

func TestACommandInsideReachesOnlyItsOwnFiles(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, sandbox.Config{})
	h := newHost(t)
	operatorHome, err := os.UserHomeDir()
	require.NoError(t, err)

	out, err := run(t, s, h, sandbox.Spec{}, `echo written > result && pwd`)
	require.NoError(t, err, out)
	assert.Equal(t, h.work+"\n", out, "it starts in its working directory")
	raw, err := os.ReadFile(filepath.Join(h.work, "result"))
	require.NoError(t, err)
	assert.Equal(t, "written\n", string(raw), "its working directory is writable")

	out, err = run(t, s, h, sandbox.Spec{}, `ls ../..`)
	require.NoError(t, err, out)
	assert.Equal(t, "owner-a\n", out, "of the workspace only the path to the working directory exists")

	for name, script := range map[string]string{
		"the server's secret, relative":  `cat ../../../jwt-secret`,
		"the server's secret, absolute":  `cat ` + filepath.Join(h.data, "jwt-secret"),
		"another owner's directory":      `ls ` + h.sibling,
		"another owner's directory, ../": `ls ../../owner-b`,
		"the operator's home":            `ls ` + operatorHome,
		"the shadow passwords":           `cat /etc/shadow`,
		"write to the system":            `touch /usr/agent-was-here`,
		"write to /etc":                  `touch /etc/agent-was-here`,
		"write to the root":              `touch /agent-was-here`,
	} {
		out, err := run(t, s, h, sandbox.Spec{}, script)
		assert.Error(t, err, "%s: %s", name, out)
		assert.NotContains(t, out, "server-secret", name)
		assert.NotContains(t, out, "main.go", name)
	}
}

func TestACommandInsideSeesOnlyItsOwnProcessesAndHoldsNoCapability(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, sandbox.Config{})
	h := newHost(t)
	out, err := run(t, s, h, sandbox.Spec{}, `ls /proc`)
	require.NoError(t, err, out)
	var pids []int
	for _, f := range strings.Fields(out) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	// bwrap's init, the shell and ls.
	assert.LessOrEqual(t, len(pids), 3, "only the sandbox's processes are visible: %v", pids)
	assert.NotContains(t, pids, os.Getpid(), "the test process is not visible")

	out, err = run(t, s, h, sandbox.Spec{}, `grep -E "CapEff|CapBnd" /proc/self/status; id -u`)
	require.NoError(t, err, out)
	assert.Contains(t, out, "CapEff:\t0000000000000000")
	assert.Contains(t, out, "CapBnd:\t0000000000000000", "no capability can be regained")
	assert.NotContains(t, out, "\n0\n", "the user inside is not root")
}

func TestHomeAndTmpSurviveTheNextRun(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, sandbox.Config{})
	h := newHost(t)
	out, err := run(t, s, h, sandbox.Spec{}, `echo kept > "$HOME/note" && echo kept > "$TMPDIR/note"`)
	require.NoError(t, err, out)
	out, err = run(t, s, h, sandbox.Spec{}, `cat "$HOME/note" "$TMPDIR/note"; echo "$HOME $TMPDIR"`)
	require.NoError(t, err, out)
	assert.Equal(t, "kept\nkept\n"+sandbox.Home+" "+sandbox.Tmp+"\n", out)
	assert.FileExists(t, filepath.Join(h.state, "home", "note"), "the home lies in the session's state directory")
}

func TestReadOnlyBindsAreVisibleAndNotWritable(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, sandbox.Config{})
	h := newHost(t)
	file := filepath.Join(h.data, "sidecar.json")
	require.NoError(t, os.WriteFile(file, []byte("config"), 0o600))
	link := filepath.Join(h.data, "link.json")
	require.NoError(t, os.Symlink(file, link))
	out, err := run(t, s, h, sandbox.Spec{ReadOnly: []sandbox.Bind{{Host: link, Inside: "/run/agentbus/config.json"}}},
		`cat /run/agentbus/config.json; echo x >> /run/agentbus/config.json && echo WROTE`)
	assert.Contains(t, out, "config")
	assert.NotContains(t, out, "WROTE")
	_ = err
}

func TestTheProcessLimitHolds(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, sandbox.Config{MaxProcesses: 16})
	h := newHost(t)
	// The kernel exempts processes whose user is root outside: run as
	// another user, as an operator who is not root does.
	var cred *syscall.Credential
	if os.Getuid() == 0 {
		data, err := os.MkdirTemp("", "sandbox-nproc-")
		require.NoError(t, err)
		t.Cleanup(func() { _ = os.RemoveAll(data) })
		h = newHostIn(t, data)
		require.NoError(t, os.MkdirAll(filepath.Join(h.state, "home"), 0o700))
		require.NoError(t, os.MkdirAll(filepath.Join(h.state, "tmp"), 0o700))
		require.NoError(t, filepath.Walk(data, func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Chown(p, 1000, 1000)
		}))
		cred = &syscall.Credential{Uid: 1000, Gid: 1000}
	}
	out, _ := runAs(t, s, h, sandbox.Spec{}, `for i in $(seq 40); do sleep 3 & done 2>&1; echo started; wait`, cred)
	assert.Regexp(t, `(?i)fork|resource temporarily unavailable`, out, "the 17th process is refused")

	out, err := run(t, s, newHost(t), sandbox.Spec{MaxMemory: 1 << 30}, `ulimit -d`)
	require.NoError(t, err, out)
	assert.Equal(t, strconv.Itoa(1<<20)+"\n", out, "the data segment is capped (in KiB)")
}

func TestNewNamesTheMissingTool(t *testing.T) {
	t.Parallel()
	_, err := sandbox.New(sandbox.Config{Bwrap: "/nonexistent/bwrap"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "bubblewrap")
}
