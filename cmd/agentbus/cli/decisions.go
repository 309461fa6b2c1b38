package cli

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/agentbus/agentbus/internal/client"
)

// decide allows or denies a tool use: the request named, or the one the
// session waits for.
func decide(allow bool) func(e *env, fs *flag.FlagSet, args []string) error {
	return func(e *env, fs *flag.FlagSet, args []string) error {
		message := fs.String("message", "", "a message for the agent with the decision")
		pos, err := e.parse(fs, args, 1, 2)
		if err != nil {
			return err
		}
		request := ""
		if len(pos) == 2 {
			request = pos[1]
		} else {
			s, err := e.client.Session(e.ctx, pos[0])
			if err != nil {
				return err
			}
			if s.Value.PendingPermission == nil {
				return &Error{Code: ExitConflict, Err: fmt.Errorf("session %s is %s and waits for no permission", pos[0], s.Value.Status)}
			}
			request = s.Value.PendingPermission.RequestID
		}
		s, err := e.client.Decide(e.ctx, pos[0], request, allow, *message)
		return e.printStatus(s, err)
	}
}

// sessionsPlan approves or rejects the plan awaiting approval.
func sessionsPlan(e *env, fs *flag.FlagSet, args []string) error {
	feedback := fs.String("feedback", "", "what the agent should change (reject only; required)")
	pos, err := e.parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	var s client.Answer[client.Session]
	switch decision, id := pos[0], pos[1]; decision {
	case "approve":
		if *feedback != "" {
			return usageError("sessions plan approve: --feedback goes with reject")
		}
		s, err = e.client.ApprovePlan(e.ctx, id)
	case "reject":
		if *feedback == "" {
			return usageError("sessions plan reject: --feedback is required")
		}
		s, err = e.client.RejectPlan(e.ctx, id, *feedback)
	default:
		return usageError("sessions plan: want approve or reject, got %q", decision)
	}
	return e.printStatus(s, err)
}

// toolApprovalFlag reads --tool-approval: all, none, or the tools that
// wait for approval, comma-separated.
type toolApprovalFlag struct{ v *client.ToolApproval }

func (f *toolApprovalFlag) String() string {
	if f.v == nil {
		return ""
	}
	if f.v.Mode == "List" {
		return strings.Join(f.v.Tools, ",")
	}
	return strings.ToLower(f.v.Mode)
}

func (f *toolApprovalFlag) Set(s string) error {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return errors.New("want all, none or a list of tools")
	case "all":
		f.v = &client.ToolApproval{Mode: "All"}
	case "none":
		f.v = &client.ToolApproval{Mode: "None"}
	default:
		var tools []string
		for _, t := range strings.Split(s, ",") {
			if t = strings.TrimSpace(t); t != "" {
				tools = append(tools, t)
			}
		}
		f.v = &client.ToolApproval{Mode: "List", Tools: tools}
	}
	return nil
}

// toolApprovalFlags declares --tool-approval, --approval-timeout and
// --on-timeout on fs; the function returned gives what they say, or
// nil when --tool-approval was not given.
func toolApprovalFlags(fs *flag.FlagSet) func() (*client.ToolApproval, error) {
	var mode toolApprovalFlag
	fs.Var(&mode, "tool-approval", "which tool uses wait for your allow or deny: all, none, or tools such as Bash,Write")
	timeout := fs.Int("approval-timeout", 0, "seconds a tool use waits for your decision (default 120)")
	onTimeout := fs.String("on-timeout", "", "what an unanswered tool use becomes: Deny (default), Allow or Fail")
	return func() (*client.ToolApproval, error) {
		if mode.v == nil {
			if *timeout != 0 || *onTimeout != "" {
				return nil, usageError("--approval-timeout and --on-timeout go with --tool-approval")
			}
			return nil, nil
		}
		mode.v.TimeoutSeconds, mode.v.OnTimeout = *timeout, *onTimeout
		return mode.v, nil
	}
}
