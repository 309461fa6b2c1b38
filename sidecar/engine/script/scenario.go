package script

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/agentbus/agentbus/sidecar/protocol"
)

//go:embed scenarios/*.json
var scenarioFS embed.FS

// Step kinds of a scenario.
const (
	// StepText writes a text block (a subagent_message inside a subagent).
	StepText = "text"
	// StepTool makes a tool call: tool_use, permission check, the tool's
	// run time, tool_result.
	StepTool = "tool"
	// StepUsage writes a usage_update and grows the context.
	StepUsage = "usage"
	// StepSubagent spawns a subagent through a Task tool call and runs its
	// steps as the subagent.
	StepSubagent = "subagent"
	// StepQuestion asks the person through AskUserQuestion and waits for
	// answer_question.
	StepQuestion = "question"
	// StepEnterPlan enters plan mode (EnterPlanMode).
	StepEnterPlan = "enter_plan"
	// StepExitPlan presents a plan (ExitPlanMode) and waits for
	// plan_decision, revising it while it is rejected.
	StepExitPlan = "exit_plan"
	// StepVoluntaryHandoff hands off: calls the agent API's handoff
	// endpoint when there is one and writes voluntary_handoff; the session
	// ends after the turn.
	StepVoluntaryHandoff = "voluntary_handoff"
	// StepFail fails the session.
	StepFail = "fail"
	// StepAPI calls the agent API with the session key (a tool call named
	// agentbus_api); skipped when no API URL is set.
	StepAPI = "api"
	// StepWrite changes files of the working directory through a Write
	// tool call: each of Files is written, or removed when null.
	StepWrite = "write"
)

// Scenario is a scripted agent: its turns run one after another, each
// after the previous one ended and any queued messages were answered.
type Scenario struct {
	// Name identifies the scenario.
	Name string `json:"name"`
	// Description says what the scenario shows.
	Description string `json:"description"`
	// Model is the model reported when the config names none.
	Model string `json:"model,omitempty"`
	// PaceMS is the delay before each step; ScriptOptions.PaceMS overrides it.
	PaceMS int64 `json:"pace_ms,omitempty"`
	// Turns are the agent's own turns.
	Turns []Turn `json:"turns"`
	// Handoff is the document written when the context is exhausted.
	Handoff *protocol.HandoffDocument `json:"handoff,omitempty"`
}

// Turn is one turn's steps.
type Turn struct {
	// Steps run in order.
	Steps []Step `json:"steps"`
}

// Step is one thing the scripted agent does. Strings may hold the
// placeholders {{session_id}}, {{working_directory}}, {{objective}},
// {{answer}} (the last answer_question) and {{feedback}} (the last plan
// rejection's feedback).
type Step struct {
	// Kind is one of the Step* constants.
	Kind string `json:"kind"`
	// Text is a text step's text.
	Text string `json:"text,omitempty"`
	// Tool is a tool step's tool name.
	Tool string `json:"tool,omitempty"`
	// Input is a tool step's input (a JSON object), or a question step's
	// AskUserQuestion input.
	Input json.RawMessage `json:"input,omitempty"`
	// Result is a tool step's output, or a subagent's final report.
	Result string `json:"result,omitempty"`
	// IsError makes a tool step's result an error.
	IsError bool `json:"is_error,omitempty"`
	// DurationMS is how long a tool step runs (not paced).
	DurationMS int64 `json:"duration_ms,omitempty"`
	// AskPermission makes a tool step ask for approval whatever the policy.
	AskPermission bool `json:"ask_permission,omitempty"`
	// IgnoreCancel makes a tool step run its full duration even when the
	// turn is cancelled: a stuck tool, for forced stops.
	IgnoreCancel bool `json:"ignore_cancel,omitempty"`
	// Usage is a usage step's usage.
	Usage *Usage `json:"usage,omitempty"`
	// Subagent is a subagent step's subagent.
	Subagent *SubagentSpec `json:"subagent,omitempty"`
	// Plan is an exit_plan step's plan document.
	Plan string `json:"plan,omitempty"`
	// Handoff is a voluntary_handoff step's document.
	Handoff *protocol.VoluntaryHandoff `json:"handoff,omitempty"`
	// Error is a fail step's message.
	Error string `json:"error,omitempty"`
	// ExitCode is a fail step's exit code (default 1).
	ExitCode int `json:"exit_code,omitempty"`
	// Method is an api step's HTTP method.
	Method string `json:"method,omitempty"`
	// Path is an api step's path, e.g. /api/agent/sessions/{{session_id}}/log.
	Path string `json:"path,omitempty"`
	// Body is an api step's JSON body.
	Body json.RawMessage `json:"body,omitempty"`
	// Files are a write step's files, by path relative to the working
	// directory: the content to write, or null to remove the file.
	Files map[string]*string `json:"files,omitempty"`
}

// Usage is what a usage step reports.
type Usage struct {
	// InputTokens, OutputTokens, CacheReadTokens and CacheWriteTokens are
	// the call's tokens.
	InputTokens      int64 `json:"input_tokens,omitempty"`
	OutputTokens     int64 `json:"output_tokens,omitempty"`
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	// CostUSD is the call's cost; computed from the tokens when zero.
	CostUSD float64 `json:"cost_usd,omitempty"`
	// ContextPercent sets the context to this share of the limit.
	ContextPercent float64 `json:"context_percent,omitempty"`
	// ContextTokens sets the context to this size. Without ContextPercent
	// or ContextTokens the context grows by all the call's tokens.
	ContextTokens int64 `json:"context_tokens,omitempty"`
}

// SubagentSpec is a subagent a scenario spawns.
type SubagentSpec struct {
	// Type is the subagent's definition name.
	Type string `json:"type"`
	// Description and Prompt are the Task tool call's input.
	Description string `json:"description,omitempty"`
	Prompt      string `json:"prompt,omitempty"`
	// Model is the subagent's model; the session's when empty.
	Model string `json:"model,omitempty"`
	// Steps are the subagent's steps (text, tool and usage).
	Steps []Step `json:"steps"`
}

// Scenarios returns the names of the embedded scenarios, sorted.
func Scenarios() []string {
	entries, _ := scenarioFS.ReadDir("scenarios")
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".json"))
	}
	sort.Strings(names)
	return names
}

// LoadScenario returns the embedded scenario called name.
func LoadScenario(name string) (*Scenario, error) {
	raw, err := scenarioFS.ReadFile(path.Join("scenarios", name+".json"))
	if err != nil {
		return nil, fmt.Errorf("unknown scenario %q (have %s)", name, strings.Join(Scenarios(), ", "))
	}
	return ParseScenario(raw)
}

// LoadScenarioFile reads a scenario from a JSON file.
func LoadScenarioFile(file string) (*Scenario, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return ParseScenario(raw)
}

// ParseScenario reads a scenario and checks its steps.
func ParseScenario(raw []byte) (*Scenario, error) {
	var s Scenario
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	for i, t := range s.Turns {
		if len(t.Steps) == 0 {
			return nil, fmt.Errorf("scenario %q turn %d has no steps", s.Name, i+1)
		}
		for j, st := range t.Steps {
			if err := st.check(false); err != nil {
				return nil, fmt.Errorf("scenario %q turn %d step %d: %w", s.Name, i+1, j+1, err)
			}
		}
	}
	return &s, nil
}

func (st Step) check(inSubagent bool) error {
	switch st.Kind {
	case StepText:
	case StepTool:
		if st.Tool == "" {
			return errors.New("tool step without tool")
		}
	case StepWrite:
		if inSubagent || len(st.Files) == 0 {
			return errors.New("write step without files, or inside a subagent")
		}
		for name := range st.Files {
			if !filepath.IsLocal(name) {
				return fmt.Errorf("write step path %q leaves the working directory", name)
			}
		}
	case StepUsage:
		if st.Usage == nil {
			return errors.New("usage step without usage")
		}
	case StepSubagent, StepQuestion, StepEnterPlan, StepExitPlan, StepVoluntaryHandoff, StepFail, StepAPI:
		if inSubagent {
			return fmt.Errorf("%s step inside a subagent", st.Kind)
		}
		if st.Kind == StepSubagent {
			if st.Subagent == nil {
				return errors.New("subagent step without subagent")
			}
			for _, sub := range st.Subagent.Steps {
				if err := sub.check(true); err != nil {
					return err
				}
			}
		}
		if st.Kind == StepVoluntaryHandoff && st.Handoff == nil {
			return errors.New("voluntary_handoff step without handoff")
		}
	default:
		return fmt.Errorf("unknown step kind %q", st.Kind)
	}
	return nil
}

var scenarioTag = regexp.MustCompile(`\[scenario:([a-z0-9_-]+)\]`)

// pickScenario loads the scenario the options name, else the one an
// objective's [scenario:<name>] tag names, else "default".
func pickScenario(opts protocol.ScriptOptions, objective string) (*Scenario, error) {
	switch {
	case opts.ScenarioFile != "":
		return LoadScenarioFile(opts.ScenarioFile)
	case opts.Scenario != "":
		return LoadScenario(opts.Scenario)
	}
	if m := scenarioTag.FindStringSubmatch(objective); m != nil {
		return LoadScenario(m[1])
	}
	return LoadScenario("default")
}
