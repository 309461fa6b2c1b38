package sidecar

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/agentbus/agentbus/sidecar/protocol"
)

// validationEnv are the variables a validation command inherits from the
// sidecar: what a build needs to run, never the sidecar's own settings
// (its Redis URL, the agent's API key) nor anything of the server's.
var validationEnv = []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ"}

func (r *runner) onRunValidation(e protocol.Entry) error {
	var v protocol.RunValidation
	if err := protocol.DecodeData(e.Data, &v); err != nil {
		return err
	}
	if err := v.Validate(); err != nil {
		return err
	}
	// The checks may take minutes: the command reader goes on meanwhile.
	go func() {
		res := protocol.ValidationResult{CommandID: e.CommandID, Checks: make([]protocol.CheckResult, 0, len(v.Checks))}
		dir := r.config().WorkingDirectory
		for _, c := range v.Checks {
			res.Checks = append(res.Checks, runCheck(dir, c, v.Timeout()))
		}
		r.emitLog(res)
	}()
	return nil
}

// runCheck runs one check with sh in dir, with an allow-listed
// environment, in a process group of its own so that a timeout stops what
// it started too.
func runCheck(dir string, c protocol.ValidationCheck, timeout time.Duration) protocol.CheckResult {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", c.Command)
	cmd.Dir = dir
	cmd.Env = allowedEnv(validationEnv)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	res := protocol.CheckResult{Name: c.Name, Command: c.Command, Output: tail(string(out), protocol.MaxValidationOutput)}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		res.ExitCode, res.TimedOut = -1, true
	case errors.As(err, &exit):
		res.ExitCode = exit.ExitCode()
	case err != nil:
		res.ExitCode = -1
		res.Output = tail(err.Error()+"\n"+res.Output, protocol.MaxValidationOutput)
	}
	return res
}

func allowedEnv(names []string) []string {
	env := make([]string, 0, len(names))
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok {
			env = append(env, n+"="+v)
		}
	}
	return env
}

// tail returns the last max characters of s.
func tail(s string, max int) string {
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[len(r)-max:])
}
