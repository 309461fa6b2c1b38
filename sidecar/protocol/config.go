package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"
)

// Engine names.
const (
	// EngineScript is the deterministic, scenario-driven engine; it needs
	// no API key. It is the default.
	EngineScript = "script"
	// EngineClaude drives the Claude Code CLI.
	EngineClaude = "claude"
)

// Defaults of a Config.
const (
	DefaultContextMaxTokens   = 200_000
	DefaultContextWarnPercent = 85
	DefaultStopTimeout        = 5 * time.Second
	DefaultPermissionTimeout  = 2 * time.Minute
)

// Config is a session's composed config: what the launcher hands the
// sidecar at start and what reload_config carries. Field names are
// snake_case in JSON.
type Config struct {
	// SessionID is the session; optional in a file (the --session flag
	// names it), checked against the flag when set.
	SessionID string `json:"session_id,omitempty"`
	// Engine is "script" (default) or "claude".
	Engine string `json:"engine,omitempty"`
	// Model is the model id, e.g. "claude-sonnet-4-5"; the script engine
	// reports its scenario's model when empty.
	Model string `json:"model,omitempty"`
	// SystemPrompt is the composed system prompt (template + skills).
	SystemPrompt string `json:"system_prompt,omitempty"`
	// AllowedTools lists the tools the agent may use; empty allows all.
	AllowedTools []string `json:"allowed_tools,omitempty"`
	// WorkingDirectory is the absolute path the agent works in.
	WorkingDirectory string `json:"working_directory,omitempty"`
	// Objective is what the agent is asked to do; the first turn's input.
	Objective string `json:"objective,omitempty"`
	// MCPTools are the custom tools merged from the template and skills.
	MCPTools []MCPTool `json:"mcp_tools,omitempty"`
	// Subagents are the subagent definitions merged from the skills.
	Subagents []Subagent `json:"subagents,omitempty"`
	// PermissionPolicy says which tool calls need a person's approval.
	PermissionPolicy PermissionPolicy `json:"permission_policy"`
	// Context configures context window monitoring.
	Context ContextPolicy `json:"context"`
	// StopTimeoutMS is how long a stop waits for the agent before
	// abandoning it. Default 5000.
	StopTimeoutMS int64 `json:"stop_timeout_ms,omitempty"`
	// StayIdle keeps the sidecar running after the agent's work is done,
	// waiting for steering messages until stop. By default the session ends
	// with success when the agent is done and no message waits.
	StayIdle bool `json:"stay_idle,omitempty"`
	// ResumeEngineSessionID resumes an earlier engine session (the
	// engine_session_id of its session_started): the sidecar of a session
	// started again after a crash or a restart. The objective is not run
	// again; the sidecar closes the turn its predecessor may have left open
	// with a turn_completed and waits for a message or stop.
	ResumeEngineSessionID string `json:"resume_engine_session_id,omitempty"`
	// ResumeAt is the engine's conversation position to resume at (the
	// Position of a checkpoint): with ResumeEngineSessionID, the agent
	// goes on from that point, what came after it forgotten.
	ResumeAt string `json:"resume_at,omitempty"`
	// ForkEngineSession makes the resumed conversation a new one of its own
	// (a fork): the engine session resumed is left as it was.
	ForkEngineSession bool `json:"fork_engine_session,omitempty"`
	// ResumeWithObjective runs the objective as the first turn of a
	// conversation resumed at ResumeAt (a fork given an objective of its
	// own); otherwise the resumed agent waits for a message.
	ResumeWithObjective bool `json:"resume_with_objective,omitempty"`
	// StartPaused keeps a resumed session paused, as it was when its
	// sidecar was replaced (a rewind of a Paused session), until a resume
	// command: the turn left open ends after it.
	StartPaused bool `json:"start_paused,omitempty"`
	// CheckpointStore is the private object store (a bare git repository
	// outside the working directory) where the sidecar snapshots the
	// working directory at the end of every turn; empty takes none.
	CheckpointStore string `json:"checkpoint_store,omitempty"`
	// CheckpointKeep is how many of the session's newest checkpoints the
	// store keeps; older ones are pruned. 0 keeps any number.
	CheckpointKeep int `json:"checkpoint_keep,omitempty"`
	// CheckpointMaxAgeSeconds prunes the checkpoints taken longer ago; 0
	// keeps any age. The newest checkpoint is always kept.
	CheckpointMaxAgeSeconds int64 `json:"checkpoint_max_age_seconds,omitempty"`
	// TurnsBefore is how many turns the session completed before this
	// sidecar: checkpoints are numbered on from it.
	TurnsBefore int `json:"turns_before,omitempty"`
	// ChainID is the session chain, when the session belongs to one.
	ChainID string `json:"chain_id,omitempty"`
	// Attempt is the run of its session the sidecar serves: 0 for the
	// first, n after the n-th retry. A sidecar of an earlier run is
	// replaced, never reused, by its session's next run.
	Attempt int `json:"attempt,omitempty"`
	// Script configures the script engine.
	Script ScriptOptions `json:"script"`
}

// MCPTool is a custom tool served by an MCP server.
type MCPTool struct {
	// Name is the tool's name.
	Name string `json:"name"`
	// Description tells the model what the tool does.
	Description string `json:"description,omitempty"`
	// InputSchema is the tool's JSON Schema.
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	// ServerURI is the MCP server's absolute URI.
	ServerURI string `json:"server_uri"`
}

// Subagent is a subagent definition.
type Subagent struct {
	// Name is the subagent type's name.
	Name string `json:"name"`
	// Description tells the model when to use it.
	Description string `json:"description,omitempty"`
	// Model is the subagent's model.
	Model string `json:"model,omitempty"`
	// Instructions are the subagent's system prompt.
	Instructions string `json:"instructions,omitempty"`
	// Tools are the subagent's tools.
	Tools []MCPTool `json:"tools,omitempty"`
}

// PermissionPolicy says which tool calls wait for a person.
type PermissionPolicy struct {
	// RequireApproval lists the tools whose calls need approval through
	// permission_request / permission_response; "*" means every tool.
	RequireApproval []string `json:"require_approval,omitempty"`
	// TimeoutMS is how long a permission request waits before the call is
	// denied (fail closed). Default 120000.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// AutoApprovePlans approves ExitPlanMode plans without waiting for a
	// plan_decision. By default plans wait for a decision.
	AutoApprovePlans bool `json:"auto_approve_plans,omitempty"`
}

// NeedsApproval reports whether a call of tool waits for a person.
func (p PermissionPolicy) NeedsApproval(tool string) bool {
	for _, t := range p.RequireApproval {
		if t == "*" || t == tool {
			return true
		}
	}
	return false
}

// Timeout returns the permission timeout.
func (p PermissionPolicy) Timeout() time.Duration {
	if p.TimeoutMS <= 0 {
		return DefaultPermissionTimeout
	}
	return time.Duration(p.TimeoutMS) * time.Millisecond
}

// ContextPolicy configures context window monitoring.
type ContextPolicy struct {
	// MaxTokens is the context limit when the engine does not report one.
	// Default 200000.
	MaxTokens int64 `json:"max_tokens,omitempty"`
	// WarnPercent is the usage at which context_nearing_limit is written.
	// Default 85.
	WarnPercent float64 `json:"warn_percent,omitempty"`
}

// ScriptOptions configure the script engine.
type ScriptOptions struct {
	// Scenario names an embedded scenario (default, question, plan,
	// permission, exhaust, handoff, fail, long). When empty, a
	// "[scenario:<name>]" tag in the objective picks one, else "default".
	Scenario string `json:"scenario,omitempty"`
	// ScenarioFile is the path of a scenario JSON file; it wins over Scenario.
	ScenarioFile string `json:"scenario_file,omitempty"`
	// PaceMS overrides the scenario's delay before each step.
	PaceMS *int64 `json:"pace_ms,omitempty"`
}

// SetDefaults fills in the defaults of unset fields.
func (c *Config) SetDefaults() {
	if c.Engine == "" {
		c.Engine = EngineScript
	}
	if c.Context.MaxTokens <= 0 {
		c.Context.MaxTokens = DefaultContextMaxTokens
	}
	if c.Context.WarnPercent <= 0 {
		c.Context.WarnPercent = DefaultContextWarnPercent
	}
	if c.StopTimeoutMS <= 0 {
		c.StopTimeoutMS = DefaultStopTimeout.Milliseconds()
	}
}

// Validate reports a config a sidecar cannot run with.
func (c Config) Validate() error {
	switch {
	case c.SessionID != "" && !ValidSessionID(c.SessionID):
		return fmt.Errorf("session_id %q may hold only a-z, 0-9, '-' and '_'", c.SessionID)
	case c.Engine != EngineScript && c.Engine != EngineClaude:
		return fmt.Errorf("engine %q is neither script nor claude", c.Engine)
	case c.WorkingDirectory != "" && !filepath.IsAbs(c.WorkingDirectory):
		return fmt.Errorf("working_directory %q is not an absolute path", c.WorkingDirectory)
	case c.CheckpointKeep < 0 || c.CheckpointMaxAgeSeconds < 0:
		return fmt.Errorf("checkpoint_keep %d and checkpoint_max_age_seconds %d may not be negative", c.CheckpointKeep, c.CheckpointMaxAgeSeconds)
	case c.CheckpointStore != "" && !filepath.IsAbs(c.CheckpointStore):
		return fmt.Errorf("checkpoint_store %q is not an absolute path", c.CheckpointStore)
	case c.Context.WarnPercent > 100:
		return errors.New("context.warn_percent exceeds 100")
	}
	return nil
}

// StopTimeout returns the stop timeout.
func (c Config) StopTimeout() time.Duration {
	if c.StopTimeoutMS <= 0 {
		return DefaultStopTimeout
	}
	return time.Duration(c.StopTimeoutMS) * time.Millisecond
}

// ParseConfig reads a JSON config, sets its defaults and validates it.
func ParseConfig(raw []byte) (Config, error) {
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return c, nil
}
