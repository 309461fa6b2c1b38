package uptest

import (
	"fmt"
	"strings"
	"testing"
)

// Flow is one thing a person does with a session, as the README's table
// of flows names it. Each engine's flow test runs every flow through up's
// real runtime, or the flow says why that engine cannot do it.
type Flow struct {
	Name string
	// Alone flows run after the others, one at a time: they restart the
	// deployment.
	Alone bool
	// Unsupported says, by engine, why the engine does not do the flow.
	Unsupported map[string]string
}

// The engines whose flows are tested.
const (
	EngineScript = "script"
	EngineClaude = "claude"
)

// Flows are the flows of a session, in the README's order.
var Flows = []Flow{
	{Name: "Follow-up on an Idle session"},
	{Name: "Immediate steering mid-turn"},
	{Name: "Queued message after the turn"},
	{Name: "Question and answer"},
	{Name: "Plan approved"},
	{Name: "Plan rejected, then approved"},
	{Name: "Tool permission allowed"},
	{Name: "Tool permission denied"},
	{Name: "Tool permission timed out"},
	{Name: "Pause and resume during a tool call"},
	{Name: "Interrupt"},
	{Name: "Cancel"},
	{Name: "Force cancel"},
	{Name: "Budget spent, raised, resumed"},
	{Name: "Output approved"},
	{Name: "Output rejected, then retried"},
	{Name: "Close"},
	{Name: "Context exhausted, handed off"},
	{Name: "Voluntary handoff", Unsupported: map[string]string{
		EngineClaude: "Claude Code has no handoff tool; its agent can call the agent API's handoff endpoint with the session key from a tool, which no flow test drives yet",
	}},
	{Name: "Auto-continue after a failed validation"},
	{Name: "Skill enabled and reloaded"},
	{Name: "Sidecar killed mid-turn"},
	{Name: "Restart of up", Alone: true},
}

// RunFlows runs each flow's test in its own parallel subtest, named after
// the flow. It fails for a flow with neither a test nor a reason for the
// engine, and for a test of a flow the table does not list.
func RunFlows(t *testing.T, engine string, tests map[string]func(t *testing.T)) {
	t.Helper()
	listed := map[string]bool{}
	var alone []Flow
	t.Run("together", func(t *testing.T) {
		for _, f := range Flows {
			listed[f.Name] = true
			test, ok := tests[f.Name]
			why := f.Unsupported[engine]
			switch {
			case ok && why != "":
				t.Errorf("flow %q is tested with the %s engine but listed as unsupported: %s", f.Name, engine, why)
			case !ok && why == "":
				t.Errorf("flow %q has no test with the %s engine and no reason why", f.Name, engine)
			case ok && f.Alone:
				alone = append(alone, f)
			case ok:
				t.Run(f.Name, func(t *testing.T) {
					t.Parallel()
					test(t)
				})
			}
		}
	})
	for _, f := range alone {
		t.Run(f.Name, tests[f.Name])
	}
	for name := range tests {
		if !listed[name] {
			t.Errorf("flow %q is tested but not listed in uptest.Flows", name)
		}
	}
}

// FlowTable is the README's table of flows: which each engine supports,
// and why not where it does not.
func FlowTable() string {
	var b strings.Builder
	b.WriteString("| Flow | script engine | claude engine |\n|---|---|---|\n")
	cell := func(f Flow, engine string) string {
		if why := f.Unsupported[engine]; why != "" {
			return "no: " + why
		}
		return "yes"
	}
	for _, f := range Flows {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", f.Name, cell(f, EngineScript), cell(f, EngineClaude))
	}
	return b.String()
}
