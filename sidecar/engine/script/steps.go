package script

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/agentbus/agentbus/sidecar/engine"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// Tool names the scripted agent uses besides a scenario's own.
const (
	ToolAskUserQuestion = "AskUserQuestion"
	ToolEnterPlanMode   = "EnterPlanMode"
	ToolExitPlanMode    = "ExitPlanMode"
	ToolTask            = "Task"
	// ToolAgentAPI is the tool call that stands for a request to the agent API.
	ToolAgentAPI = "agentbus_api"
)

// interrupted is the tool_result content of a call cut short by the turn's end.
const interrupted = "[Request interrupted by user for tool use]"

// subagent is the subagent a step runs as; nil means the main agent.
type subagent struct {
	id, typ, parent, model string
	contextUsed            int64
}

// run runs one step. It returns an error only for a failure of the session.
func (s *session) run(ctx context.Context, st Step, sub *subagent) error {
	switch st.Kind {
	case StepText:
		return s.emitText(s.expand(st.Text), sub)
	case StepUsage:
		return s.emitUsage(*st.Usage, sub)
	case StepTool:
		return s.runTool(ctx, st, sub)
	case StepSubagent:
		return s.runSubagent(ctx, st)
	case StepQuestion:
		return s.runQuestion(ctx, st)
	case StepEnterPlan:
		id, err := s.toolUse(ToolEnterPlanMode, json.RawMessage("{}"), nil)
		if err != nil {
			return err
		}
		return s.toolResult(id, "Entered plan mode. Explore the code and design an approach before writing any.", false, nil)
	case StepExitPlan:
		return s.runExitPlan(ctx, st)
	case StepVoluntaryHandoff:
		return s.runVoluntaryHandoff(ctx, st)
	case StepFail:
		msg := s.expand(st.Error)
		if msg == "" {
			msg = "the scripted agent failed"
		}
		return &engine.Failure{Message: msg, ExitCode: st.ExitCode}
	case StepAPI:
		return s.callAPI(ctx, st.Method, s.expand(st.Path), s.expandJSON(st.Body))
	case StepWrite:
		return s.runWrite(st)
	}
	return fmt.Errorf("unknown step kind %q", st.Kind)
}

func (s *session) emitText(text string, sub *subagent) error {
	if sub != nil {
		return s.host.Emit(protocol.SubagentMessage{
			SubagentID: sub.id, SubagentType: sub.typ, ParentToolUseID: sub.parent,
			MessageID: s.nextID("msg"), Text: text, Model: sub.model,
		})
	}
	return s.host.Emit(protocol.AssistantMessage{
		MessageID: s.nextID("msg"), BlockType: protocol.BlockText, Text: text, Model: s.Model(),
	})
}

func (s *session) toolUse(name string, input json.RawMessage, sub *subagent) (string, error) {
	id := s.nextID("toolu")
	m := protocol.AssistantMessage{
		MessageID: s.nextID("msg"), BlockType: protocol.BlockToolUse,
		ToolUseID: id, ToolName: name, Input: input, Model: s.Model(),
	}
	if sub != nil {
		m.Model, m.SubagentID, m.ParentToolUseID = sub.model, sub.id, sub.parent
	}
	return id, s.host.Emit(m)
}

func (s *session) toolResult(id, content string, isError bool, sub *subagent) error {
	r := protocol.ToolResult{ToolUseID: id, Content: content, IsError: isError}
	if sub != nil {
		r.SubagentID, r.ParentToolUseID = sub.id, sub.parent
	}
	return s.host.Emit(r)
}

func (s *session) emitUsage(u Usage, sub *subagent) error {
	cost := u.CostUSD
	if cost == 0 {
		// Sonnet-like prices per million tokens, so costs look plausible.
		cost = (3*float64(u.InputTokens) + 15*float64(u.OutputTokens) +
			0.3*float64(u.CacheReadTokens) + 3.75*float64(u.CacheWriteTokens)) / 1e6
	}
	cost = math.Round(cost*1e6) / 1e6
	limit := s.config().Context.MaxTokens
	if limit <= 0 {
		limit = protocol.DefaultContextMaxTokens
	}
	used, model := &s.contextUsed, s.Model()
	if sub != nil {
		used, model = &sub.contextUsed, sub.model
	}
	switch {
	case u.ContextPercent > 0:
		*used = int64(u.ContextPercent * float64(limit) / 100)
	case u.ContextTokens > 0:
		*used = u.ContextTokens
	default:
		*used += u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
	}
	ev := protocol.UsageUpdate{
		Model: model, CostUSD: cost,
		InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens,
		ContextWindowUsedTokens: *used, ContextWindowMaxTokens: limit,
	}
	if sub != nil {
		ev.IsSubagent, ev.SubagentID = true, sub.id
	}
	return s.host.Emit(ev)
}

// allowed asks the host whether a call may run and closes the call with an
// error result when it may not. ok is false when the call must not run.
func (s *session) allowed(ctx context.Context, id, name string, input json.RawMessage, sub *subagent, always bool) (bool, error) {
	req := engine.ToolRequest{ToolUseID: id, ToolName: name, Input: input, AlwaysAsk: always}
	if sub != nil {
		req.SubagentID = sub.id
	}
	p, err := s.host.CanUseTool(ctx, req)
	if err != nil {
		return false, s.toolResult(id, interrupted, true, sub)
	}
	if p.Allow {
		return true, nil
	}
	msg := p.Message
	if msg == "" {
		msg = "denied"
	}
	if err := s.toolResult(id, "Permission to use "+name+" was denied: "+msg, true, sub); err != nil {
		return false, err
	}
	return false, s.emitText(fmt.Sprintf("The %s call was denied (%s); I will go on without it.", name, msg), sub)
}

func (s *session) runTool(ctx context.Context, st Step, sub *subagent) error {
	input := s.expandJSON(st.Input)
	id, err := s.toolUse(st.Tool, input, sub)
	if err != nil {
		return err
	}
	if ok, err := s.allowed(ctx, id, st.Tool, input, sub, st.AskPermission); !ok {
		return err
	}
	d := time.Duration(st.DurationMS) * time.Millisecond
	if st.IgnoreCancel {
		time.Sleep(d)
	} else if err := sleep(ctx, d); err != nil {
		return s.toolResult(id, interrupted, true, sub)
	}
	out := s.expand(st.Result)
	if out == "" {
		// A tool result is never empty (the domain requires content).
		out = "(no output)"
	}
	return s.toolResult(id, out, st.IsError, sub)
}

func (s *session) runSubagent(ctx context.Context, st Step) error {
	spec := st.Subagent
	input, _ := json.Marshal(map[string]string{
		"description": s.expand(spec.Description), "prompt": s.expand(spec.Prompt), "subagent_type": spec.Type,
	})
	taskID, err := s.toolUse(ToolTask, input, nil)
	if err != nil {
		return err
	}
	if ok, err := s.allowed(ctx, taskID, ToolTask, input, nil, false); !ok {
		return err
	}
	model := spec.Model
	if model == "" {
		model = s.Model()
	}
	sub := &subagent{id: s.nextID("agent"), typ: spec.Type, parent: taskID, model: model}
	for _, step := range spec.Steps {
		if err := s.pace(ctx); err != nil {
			return s.toolResult(taskID, interrupted, true, nil)
		}
		if err := s.run(ctx, step, sub); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return s.toolResult(taskID, interrupted, true, nil)
		}
	}
	return s.toolResult(taskID, s.expand(st.Result), false, nil)
}

func (s *session) runQuestion(ctx context.Context, st Step) error {
	id, err := s.toolUse(ToolAskUserQuestion, s.expandJSON(st.Input), nil)
	if err != nil {
		return err
	}
	answer, err := s.host.AwaitAnswer(ctx, id)
	if err != nil {
		return s.toolResult(id, interrupted, true, nil)
	}
	s.answer = answer
	return s.toolResult(id, fmt.Sprintf("User has answered your question: %q. Go on with this answer in mind.", answer), false, nil)
}

func (s *session) runExitPlan(ctx context.Context, st Step) error {
	plan := s.expand(st.Plan)
	for {
		input, _ := json.Marshal(map[string]string{"plan": plan})
		id, err := s.toolUse(ToolExitPlanMode, input, nil)
		if err != nil {
			return err
		}
		d, err := s.host.AwaitPlanDecision(ctx, id)
		if err != nil {
			return s.toolResult(id, interrupted, true, nil)
		}
		if d.Approved {
			return s.toolResult(id, "User has approved your plan. You can now start coding.", false, nil)
		}
		s.feedback = d.Feedback
		if err := s.toolResult(id, "The user rejected the plan. Feedback: "+d.Feedback, true, nil); err != nil {
			return err
		}
		if err := s.emitText("Revising the plan: "+d.Feedback, nil); err != nil {
			return err
		}
		plan += "\n\nRevised after feedback: " + d.Feedback
		if err := s.pace(ctx); err != nil {
			return nil
		}
	}
}

func (s *session) runVoluntaryHandoff(ctx context.Context, st Step) error {
	h := *st.Handoff
	h.Reason, h.Summary = s.expand(h.Reason), s.expand(h.Summary)
	h.RemainingWork, h.KeyDecisions = s.expand(h.RemainingWork), s.expand(h.KeyDecisions)
	h.TokensUsed = s.contextUsed
	body, _ := json.Marshal(map[string]string{
		"reason": h.Reason, "summary": h.Summary, "remainingWork": h.RemainingWork, "keyDecisions": h.KeyDecisions,
	})
	if err := s.callAPI(ctx, http.MethodPost, "/api/agent/sessions/"+s.setup.SessionID+"/handoff", body); err != nil {
		return err
	}
	s.done = true
	return s.host.Emit(h)
}

// callAPI makes one agent API request, shown as an agentbus_api tool call.
// Without an API URL the call is skipped.
func (s *session) callAPI(ctx context.Context, method, path string, body json.RawMessage) error {
	if method == "" {
		method = http.MethodPost
	}
	input, _ := json.Marshal(map[string]any{"method": method, "path": path, "body": body})
	id, err := s.toolUse(ToolAgentAPI, input, nil)
	if err != nil {
		return err
	}
	api := s.setup.API
	if api.URL == "" {
		return s.toolResult(id, "skipped: AGENTBUS_API_URL is not set", false, nil)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(api.URL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return s.toolResult(id, err.Error(), true, nil)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Agent-Key", api.Key)
	resp, err := s.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return s.toolResult(id, interrupted, true, nil)
		}
		return s.toolResult(id, err.Error(), true, nil)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return s.toolResult(id, fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(out)), resp.StatusCode >= 400, nil)
}

// runWrite writes and removes the step's files in the working directory.
func (s *session) runWrite(st Step) error {
	names := make([]string, 0, len(st.Files))
	for name := range st.Files {
		names = append(names, name)
	}
	sort.Strings(names)
	input, _ := json.Marshal(map[string]any{"files": names})
	id, err := s.toolUse("Write", input, nil)
	if err != nil {
		return err
	}
	dir := s.config().WorkingDirectory
	var failed []string
	for _, name := range names {
		p := filepath.Join(dir, name)
		content := st.Files[name]
		if content == nil {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				failed = append(failed, err.Error())
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			failed = append(failed, err.Error())
			continue
		}
		if err := os.WriteFile(p, []byte(s.expand(*content)), 0o644); err != nil {
			failed = append(failed, err.Error())
		}
	}
	if len(failed) > 0 {
		return s.toolResult(id, strings.Join(failed, "\n"), true, nil)
	}
	return s.toolResult(id, fmt.Sprintf("Wrote %d file(s).", len(names)), false, nil)
}
