package claude

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/sidecar/engine"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// Tools the engine bridges to the host's waits rather than to its
// permission policy.
const (
	toolAskUserQuestion = "AskUserQuestion"
	toolExitPlanMode    = "ExitPlanMode"
)

// hookPreToolUse is the id of the PreToolUse hook the engine registers: the
// CLI calls it before every tool call, which makes each call a safe point
// for pause and lets the permission policy cover tools the CLI would run
// without asking.
const hookPreToolUse = "agentbus_pre_tool_use"

// session is one CLI conversation. Turn is called by one goroutine at a
// time; mu guards what the CLI's control requests, Reload and Close touch
// concurrently.
type session struct {
	bin              string
	env              []string
	host             engine.Host
	log              *slog.Logger
	interruptTimeout time.Duration
	id               string

	closed context.Context // done once Close was called
	close  context.CancelFunc

	mu        sync.Mutex
	cfg       protocol.Config
	p         *proc
	resumable bool // the conversation exists: a new process resumes it
	// forkFrom is the conversation this one is forked from (at forkAt, a
	// chain entry's uuid) until the fork exists: a process started before
	// then forks it again.
	forkFrom, forkAt string
	// lastUUID is the uuid of the conversation's last main-chain entry:
	// the position a checkpoint resumes at.
	lastUUID string
	model    string // as the CLI reports it
	turnCtx  context.Context
	requests map[string]context.CancelFunc // control requests being handled
	waits    map[string]*personWait        // questions and plans, by tool_use id

	// costBase is the CLI's cumulative cost (total_cost_usd) already
	// reported; a result's cost is what it adds. haveTotal says costBase
	// came from a result of this engine.
	costBase    float64
	haveTotal   bool
	contextUsed int64
}

func (s *session) ID() string { return s.id }

// Position returns the uuid of the conversation's last main-chain entry,
// which --resume-session-at takes.
func (s *session) Position() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastUUID
}

func (s *session) Model() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.modelLocked()
}

func (s *session) modelLocked() string {
	if s.model != "" {
		return s.model
	}
	return modelOf(s.cfg)
}

func (s *session) config() protocol.Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}

// startProc starts a CLI process for the session's config and sends its
// initialize request; a process that resumes the conversation is also
// asked for the cost it carries over.
func (s *session) startProc() error {
	s.mu.Lock()
	cfg, resume, forkFrom, forkAt := s.cfg, s.resumable, s.forkFrom, s.forkAt
	s.mu.Unlock()
	a, err := args(cfg, s.id, resume)
	if err != nil {
		return err
	}
	if forkFrom != "" {
		a = forkArgs(a, s.id, forkFrom, forkAt)
	}
	p, err := startProc(s.bin, a, s.env, cfg.WorkingDirectory, s.log, s.onRequest, s.onCancel)
	if err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	s.log.Info("claude started", "pid", p.cmd.Process.Pid, "engine_session_id", s.id, "resume", resume, "model", modelOf(cfg))
	initialize := map[string]any{
		"subtype": controlInitialize,
		"hooks": map[string]any{
			"PreToolUse": []any{map[string]any{"matcher": ".*", "hookCallbackIds": []string{hookPreToolUse}}},
		},
		"forwardSubagentText": true,
	}
	err = p.request(initialize, func(r *controlResponse) {
		if r.Subtype != "success" {
			s.log.Error("claude refused the initialize request", "error", r.Error)
		}
	})
	if err == nil && resume {
		err = p.request(map[string]string{"subtype": controlGetSessionCost}, s.onSessionCost)
	}
	if err != nil {
		p.kill()
		return err
	}
	s.mu.Lock()
	s.p = p
	s.mu.Unlock()
	return nil
}

// sessionCost finds the cost in get_session_cost's report.
var sessionCost = regexp.MustCompile(`(?i)cost:\s*\$([0-9]+(?:\.[0-9]+)?)`)

// onSessionCost takes the cost a resumed conversation carries over: the
// CLI's total_cost_usd goes on from it. The report is rounded, so a total
// this engine saw itself wins when the two agree.
func (s *session) onSessionCost(r *controlResponse) {
	var body struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(r.Response, &body)
	m := sessionCost.FindStringSubmatch(body.Text)
	if m == nil {
		s.log.Warn("claude reported no session cost; the first turn's cost may include earlier turns", "response", truncate(string(r.Response), 200))
		return
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.haveTotal && math.Abs(v-s.costBase) <= 0.01 {
		return
	}
	s.costBase = v
}

// ensureProc returns the running process, starting a new one (resuming
// the conversation) when the last one has exited.
func (s *session) ensureProc() (*proc, error) {
	s.mu.Lock()
	p := s.p
	s.mu.Unlock()
	if p != nil && !p.exited() {
		return p, nil
	}
	if p != nil {
		s.log.Warn("claude had exited; starting it again", "error", p.exitError())
	}
	if err := s.startProc(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p, nil
}

// Turn sends in as a user message and maps what the CLI writes until the
// turn's result. A cancelled ctx interrupts the turn.
func (s *session) Turn(ctx context.Context, in engine.Input) (engine.TurnResult, error) {
	text := in.Text
	if in.Kind == engine.InputContinue {
		text = "Continue."
	}
	if strings.TrimSpace(text) == "" || ctx.Err() != nil {
		return engine.TurnResult{}, ctx.Err()
	}
	if s.closed.Err() != nil {
		return engine.TurnResult{}, errNotRunning
	}
	p, err := s.ensureProc()
	if err != nil {
		return engine.TurnResult{}, err
	}
	s.mu.Lock()
	s.turnCtx = ctx
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.turnCtx = nil
		s.mu.Unlock()
		s.disarm()
	}()
	err = s.newTurn(ctx, p).run(text)
	for tries := 1; tries <= maxResumeRetries && resumeRefused(err); tries++ {
		present, placeErr := s.restoreTranscript(ctx)
		s.log.Warn("claude found no conversation to resume; starting it again",
			"engine_session_id", s.id, "try", tries, "transcript_was_there", present, "error", err)
		if placeErr != nil {
			return engine.TurnResult{}, placeErr
		}
		p.kill()
		if p, err = s.ensureProc(); err != nil {
			return engine.TurnResult{}, err
		}
		err = s.newTurn(ctx, p).run(text)
	}
	return engine.TurnResult{}, err
}

func (s *session) newTurn(ctx context.Context, p *proc) *turn {
	return &turn{s: s, p: p, ctx: ctx, uuid: uuid.NewString(), open: map[string]call{}, results: map[string]bool{}}
}

// maxResumeRetries bounds how often a turn starts the CLI again after it
// found no conversation to resume.
const maxResumeRetries = 2

// resumeRefused reports whether err is the CLI ending a turn, before any
// work, because it found no conversation to resume. A CLI started right
// after its predecessor stopped does so now and then; the next one
// resumes the same conversation.
func resumeRefused(err error) bool {
	var f *engine.Failure
	return errors.As(err, &f) && strings.Contains(f.Message, "No conversation found with session ID")
}

// restoreTranscript puts the checkpoint store's copy of the conversation
// where the CLI resumes it from when its own file is gone, and reports
// whether the file was there.
func (s *session) restoreTranscript(ctx context.Context) (present bool, err error) {
	cfg := s.config()
	if _, statErr := os.Stat(transcriptPath(s.env, cfg.WorkingDirectory, s.id)); statErr == nil {
		return true, nil
	}
	return false, s.placeTranscript(ctx, cfg.WorkingDirectory, cfg.CheckpointStore, s.id)
}

// Reload restarts the CLI with the new config; the conversation goes on
// through --resume.
func (s *session) Reload(_ context.Context, cfg protocol.Config) error {
	s.mu.Lock()
	s.cfg = cfg
	s.model = ""
	p := s.p
	s.p = nil
	s.mu.Unlock()
	if p != nil {
		p.stop(time.Second)
	}
	return s.startProc()
}

// Close ends the CLI process.
func (s *session) Close() error {
	s.close()
	s.mu.Lock()
	p := s.p
	s.p = nil
	cancels := make([]context.CancelFunc, 0, len(s.requests))
	for _, c := range s.requests {
		cancels = append(cancels, c)
	}
	s.mu.Unlock()
	for _, c := range cancels {
		c()
	}
	if p != nil {
		p.stop(time.Second)
	}
	return nil
}

// onRequest handles one control request of the CLI.
func (s *session) onRequest(p *proc, f *frame) {
	var req controlRequest
	if err := json.Unmarshal(f.Request, &req); err != nil {
		_ = p.respondError(f.RequestID, "malformed request: "+err.Error())
		return
	}
	ctx, done := s.requestContext(f.RequestID)
	defer done()
	var resp any
	switch req.Subtype {
	case controlCanUseTool:
		resp = s.canUseTool(ctx, req)
	case controlHookCallback:
		resp = s.hook(ctx, req)
	case controlUserDialog:
		// The engine declares no dialog kinds, and a dialog of a kind not
		// declared must stay unanswered.
		return
	default:
		s.log.Warn("claude sent a control request the engine does not handle", "subtype", req.Subtype)
		_ = p.respondError(f.RequestID, "agentbus does not handle "+req.Subtype)
		return
	}
	if err := p.respond(f.RequestID, resp); err != nil && !p.exited() {
		s.log.Warn("control response not sent", "subtype", req.Subtype, "error", err)
	}
}

// requestContext returns the context a control request is handled in: the
// running turn's, also ended by a control_cancel_request or Close.
func (s *session) requestContext(id string) (context.Context, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	parent := s.turnCtx
	if parent == nil {
		parent = s.closed
	}
	ctx, cancel := context.WithCancel(parent)
	stop := context.AfterFunc(s.closed, cancel)
	s.requests[id] = cancel
	return ctx, func() {
		stop()
		cancel()
		s.mu.Lock()
		delete(s.requests, id)
		s.mu.Unlock()
	}
}

// onCancel withdraws a control request the CLI no longer waits for.
func (s *session) onCancel(id string) {
	s.mu.Lock()
	cancel := s.requests[id]
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// canUseTool answers a permission prompt: AskUserQuestion with the answer,
// ExitPlanMode with the plan decision, any other tool with the host's
// permission (which denies when nobody answers in time).
func (s *session) canUseTool(ctx context.Context, req controlRequest) any {
	input := req.Input
	if len(input) == 0 || string(input) == "null" {
		input = json.RawMessage("{}")
	}
	cut := permissionDeny{Behavior: protocol.BehaviorDeny, Message: "The turn was cut short before the user decided."}
	switch req.ToolName {
	case toolAskUserQuestion:
		w := s.wait(ctx, req.ToolName, req.ToolUseID)
		select {
		case <-w.done:
		case <-ctx.Done():
			return cut
		}
		if w.err != nil {
			return cut
		}
		return permissionAllow{Behavior: protocol.BehaviorAllow, UpdatedInput: withAnswers(input, w.answer)}
	case toolExitPlanMode:
		w := s.wait(ctx, req.ToolName, req.ToolUseID)
		select {
		case <-w.done:
		case <-ctx.Done():
			return cut
		}
		d, err := w.plan, w.err
		switch {
		case err != nil:
			return cut
		case d.Approved:
			return permissionAllow{Behavior: protocol.BehaviorAllow, UpdatedInput: input}
		}
		msg := "The user rejected the plan."
		if d.Feedback != "" {
			msg += " Feedback: " + d.Feedback
		}
		return permissionDeny{Behavior: protocol.BehaviorDeny, Message: msg}
	}
	perm, err := s.host.CanUseTool(ctx, engine.ToolRequest{
		ToolUseID: req.ToolUseID, ToolName: req.ToolName, Input: input, SubagentID: req.AgentID,
	})
	switch {
	case err != nil:
		return cut
	case perm.Allow:
		return permissionAllow{Behavior: protocol.BehaviorAllow, UpdatedInput: input}
	}
	msg := perm.Message
	if msg == "" {
		msg = "The user denied this tool call."
	}
	return permissionDeny{Behavior: protocol.BehaviorDeny, Message: msg}
}

// personWait is the host's wait for the answer to a question or the
// decision on a plan.
type personWait struct {
	done   chan struct{}
	answer string
	plan   engine.PlanDecision
	err    error
}

// arm starts waiting for a person's answer to an AskUserQuestion call, or
// decision on an ExitPlanMode call, as soon as the call is seen: before its
// tool_use event is written, so an answer sent right after that event
// finds the host waiting. The CLI's permission prompt for the call, which
// follows some milliseconds later, takes the result.
func (s *session) arm(ctx context.Context, tool, toolUseID string) {
	w := &personWait{done: make(chan struct{})}
	s.mu.Lock()
	s.waits[toolUseID] = w
	s.mu.Unlock()
	go func() {
		defer close(w.done)
		if tool == toolExitPlanMode {
			w.plan, w.err = s.host.AwaitPlanDecision(ctx, toolUseID)
			return
		}
		w.answer, w.err = s.host.AwaitAnswer(ctx, toolUseID)
	}()
}

// wait returns the armed wait of a call, arming it now if it was not.
func (s *session) wait(ctx context.Context, tool, toolUseID string) *personWait {
	s.mu.Lock()
	w := s.waits[toolUseID]
	delete(s.waits, toolUseID)
	s.mu.Unlock()
	if w != nil {
		return w
	}
	s.arm(ctx, tool, toolUseID)
	return s.wait(ctx, tool, toolUseID)
}

// disarm forgets the waits of a turn that ended; they end with its context.
func (s *session) disarm() {
	s.mu.Lock()
	clear(s.waits)
	s.mu.Unlock()
}

// withAnswers adds the answer to an AskUserQuestion input, for each of its
// questions (the CLI's answers map: question text -> answer).
func withAnswers(input json.RawMessage, answer string) json.RawMessage {
	var in map[string]any
	if err := json.Unmarshal(input, &in); err != nil || in == nil {
		in = map[string]any{}
	}
	answers := map[string]any{}
	qs, _ := in["questions"].([]any)
	for _, q := range qs {
		if m, ok := q.(map[string]any); ok {
			if text, ok := m["question"].(string); ok {
				answers[text] = answer
			}
		}
	}
	in["answers"] = answers
	out, err := json.Marshal(in)
	if err != nil {
		return input
	}
	return out
}

// hook answers the PreToolUse hook: it holds the call while the session is
// paused, and has the CLI ask (through can_use_tool, so the host decides)
// when the permission policy wants approval or the tool is outside the
// allowed tools, even for calls the CLI would run without asking.
func (s *session) hook(ctx context.Context, req controlRequest) any {
	if req.CallbackID != hookPreToolUse {
		return hookOutput{}
	}
	var in hookInput
	decodeErr := json.Unmarshal(req.Input, &in)
	if decodeErr == nil && in.HookEventName != "PreToolUse" {
		return hookOutput{}
	}
	if err := s.host.SafePoint(ctx); err != nil {
		return hookOutput{HookSpecificOutput: &preToolUseOutput{
			HookEventName: "PreToolUse", PermissionDecision: protocol.BehaviorDeny,
			PermissionDecisionReason: "The turn was cut short.",
		}}
	}
	if decodeErr != nil {
		// A call this engine cannot read could be any tool: having the CLI
		// ask lets the host's policy decide instead of waving it through.
		s.log.Warn("unreadable PreToolUse hook input; the call is put to the permission policy", "err", decodeErr)
		return hookOutput{HookSpecificOutput: &preToolUseOutput{
			HookEventName: "PreToolUse", PermissionDecision: "ask",
			PermissionDecisionReason: "The tool call could not be read, so the session's permission policy decides.",
		}}
	}
	if in.ToolName == toolAskUserQuestion || in.ToolName == toolExitPlanMode {
		return hookOutput{}
	}
	cfg := s.config()
	if cfg.PermissionPolicy.NeedsApproval(in.ToolName) ||
		(len(cfg.AllowedTools) > 0 && !slices.Contains(cfg.AllowedTools, in.ToolName)) {
		return hookOutput{HookSpecificOutput: &preToolUseOutput{
			HookEventName: "PreToolUse", PermissionDecision: "ask",
			PermissionDecisionReason: "The session's permission policy asks about " + in.ToolName + ".",
		}}
	}
	return hookOutput{}
}
