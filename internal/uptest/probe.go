package uptest

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Probe is what an agent tries against the deployment that runs it, as one
// shell script run from the session's working directory: read the
// server's secrets, other processes' environments and another owner's
// files, write outside its working directory, log into Postgres, Redis
// and NATS with no or default credentials, and act through the local
// socket. Each attempt prints "<name>=open" when it got through and
// "<name>=closed" when it did not, beside the first bytes of what it got,
// so a leak shows the leaked content too.
type Probe struct {
	// DataDir is the data directory of `agentbus up` (its jwt-secret,
	// credentials and local socket).
	DataDir string
	// UpPID is the pid of `agentbus up`.
	UpPID int
	// OtherSidecarPID is the pid of another session's sidecar, and
	// OtherSession that session's id.
	OtherSidecarPID int
	OtherSession    string
	// OtherOwnerFile is a file in another owner's working directory.
	OtherOwnerFile string
	// Outside are paths outside the session's working directory the probe
	// tries to create.
	Outside []string
	// PostgresPort, RedisPort and NATSPort are the servers' ports on
	// 127.0.0.1.
	PostgresPort, RedisPort, NATSPort int
	// Socket is the local socket's path.
	Socket string
}

// attempts are the probe's names, in the order it runs them.
var attempts = []string{
	"jwt-secret", "jwt-secret-relative", "credentials-env", "data-dir",
	"environ-up", "environ-other-sidecar", "environ-any-other-session",
	"other-owner-read", "other-owner-list", "other-owner-write",
	"postgres-no-password", "postgres-default-password",
	"redis-no-password", "redis-other-stream",
	"nats-anonymous", "nats-default-operator", "local-socket",
}

// Script returns the probe as a bash script.
func (p Probe) Script() string {
	var b strings.Builder
	b.WriteString(`#!/bin/bash
# What an agent could try against the deployment that runs it.
try() {
  name=$1
  out=$(timeout 10 bash -o pipefail -c "$2" 2>&1)
  rc=$?
  printf '%s: %s\n' "$name" "$(printf '%s' "$out" | head -c 60 | tr '\n\0' '  ')"
  if [ $rc = 0 ]; then state=open; else state=closed; fi
  printf '%s=%s\n' "$name" "$state"
}
echo "probe: begin in $(pwd) as $(id -u)"
# An attempt whose client is missing would fail for nothing.
for c in cat ls tr grep psql redis-cli socat timeout; do
  command -v "$c" >/dev/null || echo "probe: no $c"
done
`)
	q := shellQuote
	data, other := p.DataDir, p.OtherSession
	try := func(name, cmd string) { fmt.Fprintf(&b, "try %s %s\n", name, q(cmd)) }
	try("jwt-secret", "cat "+q(filepath.Join(data, "jwt-secret")))
	try("jwt-secret-relative", "cat ../../../jwt-secret")
	try("credentials-env", "cat "+q(filepath.Join(data, "credentials.env")))
	// The data directory's path to the working directory may show, and
	// what an earlier run of the probe wrote where the sandbox let it
	// (not the data directory: Check looks there); none of its files may.
	try("data-dir", "ls -A "+q(data)+" | grep -vxE 'workspace|escaped'")
	try("environ-up", fmt.Sprintf("tr '\\0' '\\n' < /proc/%d/environ | grep -v '^$' | head -c 400", p.UpPID))
	try("environ-other-sidecar", fmt.Sprintf("tr '\\0' '\\n' < /proc/%d/environ | grep -v '^$' | head -c 400", p.OtherSidecarPID))
	try("environ-any-other-session", "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep "+q(other))
	try("other-owner-read", "cat "+q(p.OtherOwnerFile))
	try("other-owner-list", "ls "+q(filepath.Dir(filepath.Dir(p.OtherOwnerFile)))+" | grep -q .")
	try("other-owner-write", "echo pwned > "+q(filepath.Join(filepath.Dir(p.OtherOwnerFile), "pwned")))
	for _, path := range p.Outside {
		fmt.Fprintf(&b, "echo escaped > %s 2>/dev/null\n", q(path))
	}
	pg := func(user, password string) string {
		return fmt.Sprintf("PGPASSWORD=%s PGCONNECT_TIMEOUT=3 psql -w -h 127.0.0.1 -p %d -U %s -d postgres -Atc 'select datname from pg_database'",
			q(password), p.PostgresPort, user)
	}
	try("postgres-no-password", pg("postgres", "")+" || "+pg("agentbus", ""))
	try("postgres-default-password", pg("postgres", "postgres")+" || "+pg("agentbus", "agentbus"))
	try("redis-no-password", fmt.Sprintf("redis-cli -h 127.0.0.1 -p %d ping | grep PONG", p.RedisPort))
	try("redis-other-stream", fmt.Sprintf("redis-cli -h 127.0.0.1 -p %d XADD %s '*' type session_end data '{}' ts 0 | grep -E '^[0-9]+-[0-9]+$'",
		p.RedisPort, q("agent:session:{"+other+"}")))
	nats := func(connect string) string {
		return fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d && printf 'CONNECT %s\r\nSUB agents.> 1\r\nPING\r\n' >&3 && timeout 3 cat <&3 | grep -m1 -E 'PONG|ERR'  | grep PONG`,
			p.NATSPort, connect)
	}
	try("nats-anonymous", nats(`{"verbose":false}`))
	try("nats-default-operator", nats(`{"verbose":false,"user":"operator","pass":"change-me-operator"}`))
	try("local-socket", fmt.Sprintf(`printf '%%s\n' '{"type":"start_session","sessionId":"p","prompt":"x","cwd":"probe","budgetCapUsd":1,"requestId":"r"}' | timeout 5 socat -t 3 - UNIX-CONNECT:%s | grep '"started"'`,
		q(p.Socket)))
	b.WriteString("echo probe: end\n")
	return b.String()
}

// WriteScript writes the probe into dir as probe.sh.
func (p Probe) WriteScript(t testing.TB, dir string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "probe.sh"), []byte(p.Script()), 0o755))
}

var verdict = regexp.MustCompile(`(?m)^([a-z-]+)=(open|closed)$`)

// Check asserts that the probe ran to its end and that every attempt in
// its output failed, and that nothing outside the working directory was
// created.
func (p Probe) Check(t testing.TB, output string) {
	t.Helper()
	require.Contains(t, output, "probe: end", "the probe did not run to its end:\n%s", output)
	require.NotContains(t, output, "probe: no ", "the probe lacks a client it needs:\n%s", output)
	got := map[string]string{}
	for _, m := range verdict.FindAllStringSubmatch(output, -1) {
		got[m[1]] = m[2]
	}
	for _, name := range attempts {
		assert.Equal(t, "closed", got[name], "the agent reached %s:\n%s", name, output)
	}
	for _, path := range append(p.Outside, filepath.Join(filepath.Dir(p.OtherOwnerFile), "pwned")) {
		_, err := os.Stat(path)
		assert.True(t, os.IsNotExist(err), "the agent wrote %s outside its working directory", path)
	}
}

// NoSecrets asserts that none of secrets appears in text.
func NoSecrets(t testing.TB, where, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		require.NotEmpty(t, s, "an empty secret cannot be looked for")
		if i := strings.Index(text, s); i >= 0 {
			t.Errorf("%s shows the secret %q: …%s…", where, s, text[max(0, i-200):min(len(text), i+len(s)+50)])
		}
	}
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// OtherOwnerSession starts, as a new owner whose tokens secret signs, a
// session in the working directory "private" and waits until it is Idle,
// its sidecar running; then it writes content to a file in that working
// directory, under workspace. It returns the session's id and the file.
func (c *Client) OtherOwnerSession(secret, workspace, content string) (sessionID, file string) {
	c.T.Helper()
	owner := uuid.NewString()
	other := c.As(c.T, secret, owner)
	var started struct {
		Session Session `json:"session"`
	}
	other.Must(http.MethodPost, "/api/agents/sessions", map[string]any{"workingDirectory": "private",
		"objective": "Say hello.", "budgetCapUsd": 5}, &started)
	other.WaitFor(started.Session.ID, "Idle awaiting review", func(s Session) bool { return s.Status == "Idle" && s.HasPendingReview })
	file = filepath.Join(workspace, owner, "private", "secret.txt")
	require.NoError(c.T, os.WriteFile(file, []byte(content+"\n"), 0o644))
	return started.Session.ID, file
}
