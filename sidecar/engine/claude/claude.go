// Package claude is the engine that drives the Claude Code CLI (npm
// package @anthropic-ai/claude-code) through its stream-json protocol:
//
//	claude --print --input-format stream-json --output-format stream-json \
//	  --verbose --permission-prompt-tool stdio --model <model> \
//	  --include-partial-messages ...
//
// One CLI process runs per session and stays up between turns. The engine
// sends an initialize control request, then each turn's input as a user
// frame, and maps what the CLI writes back: assistant text and tool_use
// blocks to assistant_message, tool_result blocks to tool_result, a
// subagent's text to subagent_message, and each turn's result to one
// usage_update. The CLI's permission prompts (can_use_tool control
// requests) go to the host, which applies the session's permission policy
// and, for tools that need approval, waits for a person: agentbus owns the
// timeout and denies when it passes. AskUserQuestion waits for
// answer_question, ExitPlanMode for plan_decision. A cut-short turn is
// stopped with the interrupt control request; the CLI answers with a result
// of subtype error_during_execution, which is an interrupted turn, not a
// failed session.
package claude

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/sidecar/engine"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// Name is the engine's name in a config.
const Name = protocol.EngineClaude

// Version is the Claude Code CLI version the engine is built and tested
// against; `make deps` installs exactly this one.
const Version = "2.1.330"

// EnvBinary names the CLI executable, overriding the default search.
const EnvBinary = "AGENTBUS_CLAUDE_BIN"

// DefaultBinary is where `make deps` installs the CLI, relative to the
// project's root.
const DefaultBinary = ".tools/node/node_modules/.bin/claude"

// DefaultModel is the model a session runs on when its config names none.
const DefaultModel = "claude-sonnet-4-5"

// Engine starts sessions of the Claude Code CLI.
type Engine struct {
	// Binary is the CLI executable. Default: $AGENTBUS_CLAUDE_BIN, else
	// DefaultBinary under the directory above the running executable's
	// (bin/agentbus in a checkout) or under the current directory or one
	// of its parents, else "claude" on the PATH.
	Binary string
	// Env is added to the CLI's environment, after the sidecar's own and
	// the agent API's variables (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL,
	// HOME, for example).
	Env []string
	// InterruptTimeout bounds how long a cut-short turn waits for the CLI to
	// confirm the interrupt before the process is killed (the next turn
	// starts a new one, resuming the conversation). Default 10s.
	InterruptTimeout time.Duration
	// Logger receives the engine's log. Default slog.Default().
	Logger *slog.Logger
}

// New returns the claude engine with its defaults.
func New() *Engine { return &Engine{} }

// Start starts the CLI for a new session, or resumes the config's
// ResumeEngineSessionID. No turn runs: the CLI answers its initialize
// request together with the first turn.
func (e *Engine) Start(ctx context.Context, s engine.Setup, host engine.Host) (engine.Session, error) {
	bin, err := e.binary()
	if err != nil {
		return nil, err
	}
	log := e.Logger
	if log == nil {
		log = slog.Default()
	}
	timeout := e.InterruptTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	resumed := s.Config.ResumeEngineSessionID != ""
	id := s.Config.ResumeEngineSessionID
	if !resumed {
		id = uuid.NewString()
	}
	sess := &session{
		bin: bin, env: e.environ(s.API), host: host, log: log.With("engine", Name),
		interruptTimeout: timeout, id: id, resumable: resumed,
		requests: map[string]context.CancelFunc{}, waits: map[string]*personWait{},
	}
	if at := s.Config.ResumeAt; at != "" {
		// A position comes from an event the session's sidecar wrote:
		// only a chain entry's uuid reaches the command line.
		if _, err := uuid.Parse(at); err != nil {
			return nil, fmt.Errorf("claude: resume position %q is not a message uuid", at)
		}
	}
	if resumed && s.Config.ForkEngineSession {
		if _, err := uuid.Parse(id); err != nil {
			return nil, fmt.Errorf("claude: engine session %q to fork is not a session uuid", id)
		}
		// A conversation of its own, holding the resumed one up to
		// ResumeAt; the resumed one is left as it was.
		sess.id, sess.resumable = uuid.NewString(), false
		sess.forkFrom, sess.forkAt, sess.lastUUID = s.Config.ResumeEngineSessionID, s.Config.ResumeAt, s.Config.ResumeAt
		// A fork works in another directory, in another home: the CLI
		// finds the conversation it forks only where the checkpoint
		// store's copy is put.
		if err := sess.placeTranscript(ctx, s.Config.WorkingDirectory, s.Config.CheckpointStore, id); err != nil {
			return nil, fmt.Errorf("claude: the conversation to fork: %w", err)
		}
	}
	sess.cfg = s.Config
	sess.closed, sess.close = context.WithCancel(context.Background())
	if err := sess.startProc(); err != nil {
		return nil, err
	}
	return sess, nil
}

// privateEnv are the sidecar's variables the agent must not see: its Redis
// (where it could write the session's events) and its inline config.
var privateEnv = []string{"REDIS_URL", "AGENTBUS_SIDECAR_CONFIG"}

func (e *Engine) environ(api engine.AgentAPI) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(privateEnv, name) {
			env = append(env, kv)
		}
	}
	env = append(env, api.Env()...)
	return append(env, e.Env...)
}

// FindBinary finds the CLI executable as a sidecar of this process would:
// $AGENTBUS_CLAUDE_BIN, else DefaultBinary under the executable's parent
// directory or the working directory or one above it, else claude on PATH.
func FindBinary() (string, error) { return New().binary() }

// binary finds the CLI executable.
func (e *Engine) binary() (string, error) {
	if e.Binary != "" {
		return e.Binary, nil
	}
	if b := os.Getenv(EnvBinary); b != "" {
		return b, nil
	}
	var dirs []string
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(filepath.Dir(exe)))
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			dirs = append(dirs, d)
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	for _, d := range dirs {
		p := filepath.Join(d, DefaultBinary)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath("claude"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("the Claude Code CLI was not found: set %s, or run `make deps` to install it into %s", EnvBinary, DefaultBinary)
}

// args returns the CLI's command line for cfg; resume continues the
// session id's conversation, otherwise a new one starts under that id.
func args(cfg protocol.Config, id string, resume bool) ([]string, error) {
	a := []string{
		"--print", "--input-format", "stream-json", "--output-format", "stream-json",
		"--verbose", "--permission-prompt-tool", "stdio", "--model", modelOf(cfg),
	}
	// The CLI's partial messages become text_delta events, for a live view.
	a = append(a, "--include-partial-messages")
	if resume {
		a = append(a, "--resume", id)
	} else {
		a = append(a, "--session-id", id)
	}
	if cfg.SystemPrompt != "" {
		// Rendered afresh on every request: a reload's new prompt must
		// reach the resumed conversation, which a recorded snapshot would not.
		a = append(a, "--append-system-prompt", cfg.SystemPrompt, "--system-prompt-snapshot", "off")
	}
	mcp := groupMCPTools(cfg.MCPTools)
	if len(cfg.AllowedTools) > 0 {
		a = append(a, "--allowedTools", strings.Join(mcp.allowed(cfg.AllowedTools), ","))
	}
	if len(mcp.names) > 0 {
		servers, err := mcp.config()
		if err != nil {
			return nil, err
		}
		a = append(a, "--mcp-config", servers)
	}
	if len(cfg.Subagents) > 0 {
		agents := map[string]any{}
		for _, sa := range cfg.Subagents {
			def := map[string]any{"description": sa.Description, "prompt": sa.Instructions}
			if def["description"] == "" {
				def["description"] = sa.Name
			}
			if sa.Model != "" {
				def["model"] = sa.Model
			}
			if len(sa.Tools) > 0 {
				tools := make([]string, 0, len(sa.Tools))
				for _, t := range sa.Tools {
					tools = append(tools, t.Name)
				}
				def["tools"] = tools
			}
			agents[sa.Name] = def
		}
		b, err := json.Marshal(agents)
		if err != nil {
			return nil, err
		}
		a = append(a, "--agents", string(b))
	}
	return a, nil
}

// forkArgs turns the command line a of a new conversation id into one
// that forks the conversation from, at the chain entry at when it is set.
func forkArgs(a []string, id, from, at string) []string {
	out := make([]string, 0, len(a)+6)
	for i := 0; i < len(a); i++ {
		if a[i] == "--session-id" || a[i] == "--resume" {
			i++
			continue
		}
		out = append(out, a[i])
	}
	out = append(out, "--resume", from, "--fork-session", "--session-id", id)
	if at != "" {
		out = append(out, "--resume-session-at", at)
	}
	return out
}

func modelOf(cfg protocol.Config) string {
	if cfg.Model != "" {
		return cfg.Model
	}
	return DefaultModel
}

// errNotRunning is returned for a turn on a closed session.
var errNotRunning = errors.New("claude: the session is closed")
