// Package script is the default engine: a deterministic agent driven by a
// scenario (embedded JSON files, one picked per session). It needs no API
// key and produces every raw event type: text, tool calls with results,
// subagents, usage with cost, TodoWrite, AskUserQuestion, plan mode,
// permission requests, context growth up to exhaustion, voluntary handoff
// and failure. It honours every command through the engine.Host.
package script

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/sidecar/engine"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// Name is the engine's name in a config.
const Name = protocol.EngineScript

// Engine starts scripted sessions.
type Engine struct {
	// HTTPClient calls the agent API; default a client with a 10s timeout.
	HTTPClient *http.Client
}

// New returns the script engine.
func New() *Engine { return &Engine{} }

// Start loads the session's scenario.
func (e *Engine) Start(_ context.Context, s engine.Setup, host engine.Host) (engine.Session, error) {
	sc, err := pickScenario(s.Config.Script, s.Config.Objective)
	if err != nil {
		return nil, err
	}
	id := s.Config.ResumeEngineSessionID
	if id == "" || s.Config.ForkEngineSession {
		id = "script-" + uuid.NewString()
	}
	client := e.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	sess := &session{
		id:       id,
		short:    strings.TrimPrefix(id, "script-")[:8],
		setup:    s,
		host:     host,
		scenario: sc,
		http:     client,
	}
	sess.cfg = s.Config
	// A resumed session's scenario was played by the sidecar before it; the
	// agent answers follow-ups only.
	sess.done = s.Config.ResumeEngineSessionID != ""
	if at := s.Config.ResumeAt; at != "" && s.Config.ResumeEngineSessionID != "" {
		// Resumed at a checkpoint: the checkpoint's scenario goes on from
		// its turn, whatever the objective now says.
		var name string
		if _, err := fmt.Sscanf(at, "scenario=%s turn=%d seq=%d", &name, &sess.turn, &sess.seq); err != nil {
			return nil, fmt.Errorf("script: resume position %q: %w", at, err)
		}
		if s.Config.Script.ScenarioFile == "" && name != sc.Name {
			if sess.scenario, err = LoadScenario(name); err != nil {
				return nil, err
			}
		}
		if sess.turn < 0 || sess.turn > len(sess.scenario.Turns) {
			return nil, fmt.Errorf("script: resume position %q is not one of scenario %q", at, sess.scenario.Name)
		}
		sess.done = false
	}
	return sess, nil
}

// Position returns the scenario, the place in it the next turn starts
// from and the last message's sequence number.
func (s *session) Position() string {
	return fmt.Sprintf("scenario=%s turn=%d seq=%d", s.scenario.Name, s.turn, s.seq)
}

// session is one scripted agent. Turn is called by one goroutine at a
// time; mu guards what Reload and Handoff may touch concurrently.
type session struct {
	id       string
	short    string
	setup    engine.Setup
	host     engine.Host
	scenario *Scenario
	http     *http.Client

	mu  sync.Mutex
	cfg protocol.Config

	// Position in the script: the next step to run.
	turn, step int
	done       bool

	seq         int
	contextUsed int64
	answer      string
	feedback    string
}

func (s *session) ID() string { return s.id }

func (s *session) Model() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.modelLocked()
}

func (s *session) modelLocked() string {
	switch {
	case s.cfg.Model != "":
		return s.cfg.Model
	case s.scenario.Model != "":
		return s.scenario.Model
	}
	return "script-model"
}

func (s *session) config() protocol.Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}

// Reload takes the new config; the scenario and its position are kept.
func (s *session) Reload(_ context.Context, cfg protocol.Config) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg = cfg
	return nil
}

// Close does nothing: a scripted agent holds no resources.
func (s *session) Close() error { return nil }

// Handoff returns the scenario's handoff document, or one made from the
// objective.
func (s *session) Handoff(context.Context) (protocol.HandoffDocument, error) {
	cfg := s.config()
	if h := s.scenario.Handoff; h != nil {
		doc := *h
		doc.Summary = s.expand(doc.Summary)
		doc.RemainingWork = s.expand(doc.RemainingWork)
		doc.KeyDecisions = s.expand(doc.KeyDecisions)
		return doc, nil
	}
	return protocol.HandoffDocument{
		Summary:       fmt.Sprintf("Worked on %q through %d of %d scripted turns.", cfg.Objective, s.turn, len(s.scenario.Turns)),
		RemainingWork: "Finish the objective: " + cfg.Objective,
	}, nil
}

// Turn answers a steering message, or runs the next scripted turn.
func (s *session) Turn(ctx context.Context, in engine.Input) (engine.TurnResult, error) {
	if in.Kind == engine.InputMessage {
		if err := s.reply(ctx, in); err != nil {
			return engine.TurnResult{More: s.more()}, err
		}
		return engine.TurnResult{More: s.more()}, nil
	}
	for s.more() {
		steps := s.scenario.Turns[s.turn].Steps
		st := steps[s.step]
		if err := s.pace(ctx); err != nil {
			return engine.TurnResult{More: true}, nil
		}
		s.advance()
		endsTurn := s.step == 0
		if err := s.run(ctx, st, nil); err != nil {
			return engine.TurnResult{More: s.more()}, err
		}
		if ctx.Err() != nil || endsTurn || s.done {
			break
		}
	}
	return engine.TurnResult{More: s.more()}, nil
}

func (s *session) more() bool { return !s.done && s.turn < len(s.scenario.Turns) }

// advance moves past the current step, to the next turn after its last.
func (s *session) advance() {
	s.step++
	for s.turn < len(s.scenario.Turns) && s.step >= len(s.scenario.Turns[s.turn].Steps) {
		s.turn++
		s.step = 0
	}
}

// pace stops at a safe point, then waits the scenario's delay.
func (s *session) pace(ctx context.Context) error {
	if err := s.host.SafePoint(ctx); err != nil {
		return err
	}
	d := s.scenario.PaceMS
	if p := s.config().Script.PaceMS; p != nil {
		d = *p
	}
	return sleep(ctx, time.Duration(d)*time.Millisecond)
}

// reply answers a steering message with a short turn of its own.
func (s *session) reply(ctx context.Context, in engine.Input) error {
	if err := s.pace(ctx); err != nil {
		return nil
	}
	if err := s.emitText("Understood: "+s.expand(in.Text), nil); err != nil {
		return err
	}
	tokens := int64(len(in.Text)/4 + 40)
	return s.emitUsage(Usage{InputTokens: tokens, OutputTokens: 30}, nil)
}

func (s *session) nextID(prefix string) string {
	s.seq++
	return fmt.Sprintf("%s_%s_%03d", prefix, s.short, s.seq)
}

// expand fills in a string's placeholders.
func (s *session) expand(text string) string {
	if !strings.Contains(text, "{{") {
		return text
	}
	cfg := s.config()
	return strings.NewReplacer(
		"{{session_id}}", s.setup.SessionID,
		"{{working_directory}}", cfg.WorkingDirectory,
		"{{objective}}", cfg.Objective,
		"{{answer}}", s.answer,
		"{{feedback}}", s.feedback,
		"{{system_prompt}}", cfg.SystemPrompt,
		"{{allowed_tools}}", strings.Join(cfg.AllowedTools, ", "),
		"{{mcp_tools}}", mcpToolNames(cfg.MCPTools),
		"{{subagents}}", subagentNames(cfg.Subagents),
	).Replace(text)
}

// mcpToolNames lists the MCP tools as name@server_uri.
func mcpToolNames(tools []protocol.MCPTool) string {
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		names = append(names, t.Name+"@"+t.ServerURI)
	}
	return strings.Join(names, ", ")
}

func subagentNames(subagents []protocol.Subagent) string {
	names := make([]string, 0, len(subagents))
	for _, sa := range subagents {
		names = append(names, sa.Name)
	}
	return strings.Join(names, ", ")
}

// expandJSON fills in the placeholders inside a JSON document's strings.
func (s *session) expandJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("{}")
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return raw
	}
	out, err := json.Marshal(s.expandValue(v))
	if err != nil {
		return raw
	}
	return out
}

func (s *session) expandValue(v any) any {
	switch t := v.(type) {
	case string:
		return s.expand(t)
	case []any:
		for i := range t {
			t[i] = s.expandValue(t[i])
		}
	case map[string]any:
		for k := range t {
			t[k] = s.expandValue(t[k])
		}
	}
	return v
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
