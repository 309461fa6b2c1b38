package claude

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/agentbus/agentbus/sidecar/engine"
)

// runningHost is a session that is not paused: the hook's only decision
// left is the permission policy's.
type runningHost struct{ engine.Host }

func (runningHost) SafePoint(context.Context) error { return nil }

func TestPreToolUseHookWithUnreadableInputIsPutToThePermissionPolicy(t *testing.T) {
	s := &session{host: runningHost{}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	cases := map[string]json.RawMessage{
		"not json":      json.RawMessage(`{"hook_event_name":`),
		"wrong shape":   json.RawMessage(`{"hook_event_name":"PreToolUse","tool_name":7}`),
		"not an object": json.RawMessage(`"Bash"`),
	}
	for name, input := range cases {
		t.Run(name, func(t *testing.T) {
			out, ok := s.hook(context.Background(), controlRequest{CallbackID: hookPreToolUse, Input: input}).(hookOutput)
			if !ok || out.HookSpecificOutput == nil {
				t.Fatalf("hook answered %#v: an unreadable call went through with no decision", out)
			}
			if got := out.HookSpecificOutput.PermissionDecision; got != "ask" {
				t.Fatalf("decision %q, want ask", got)
			}
		})
	}
	// A readable call of a tool the (empty) policy lets run keeps no opinion.
	out := s.hook(context.Background(), controlRequest{CallbackID: hookPreToolUse,
		Input: json.RawMessage(`{"hook_event_name":"PreToolUse","tool_name":"Read"}`)}).(hookOutput)
	if out.HookSpecificOutput != nil {
		t.Fatalf("a readable allowed call got %+v", out.HookSpecificOutput)
	}
}
