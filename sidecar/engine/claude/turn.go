package claude

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"time"

	"github.com/agentbus/agentbus/sidecar/engine"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// turn is one user message and what the CLI does about it, up to its
// result.
type turn struct {
	s    *session
	p    *proc
	ctx  context.Context
	uuid string // the user frame's; the result echoes it

	interrupted bool            // the interrupt request was sent
	open        map[string]call // tool calls without a result yet
	results     map[string]bool // tool calls with a result
	streaming   string          // the id of the model message being streamed
}

// call is an open tool call and who made it.
type call struct {
	subagentID, parent string
}

// run sends text and handles the CLI's frames until the turn's result.
func (t *turn) run(text string) error {
	err := t.p.send(userFrame{
		Type:      frameUser,
		Message:   userMessage{Role: "user", Content: []contentBlock{{Type: "text", Text: text}}},
		SessionID: t.s.id, UUID: t.uuid,
	})
	if err != nil {
		return t.processEnded()
	}
	var deadline <-chan time.Time
	cancelled := t.ctx.Done()
	for {
		select {
		case f, ok := <-t.p.msgs:
			if !ok {
				return t.processEnded()
			}
			done, err := t.handle(f)
			if done || err != nil {
				return err
			}
		case <-cancelled:
			// Interrupt, then wait for the CLI to end the turn: its result
			// follows within milliseconds, and the conversation stays
			// consistent for the next input.
			cancelled = nil
			t.interrupted = true
			if err := t.p.request(map[string]string{"subtype": controlInterrupt}, nil); err != nil {
				t.s.log.Warn("interrupt not sent", "error", err)
			}
			deadline = time.After(t.s.interruptTimeout)
		case <-deadline:
			t.s.log.Warn("claude did not end the interrupted turn in time; killing it", "timeout", t.s.interruptTimeout)
			t.p.kill()
			return t.closeOpen()
		}
	}
}

// processEnded handles the end of the CLI's output in the middle of a turn.
func (t *turn) processEnded() error {
	<-t.p.done
	if err := t.closeOpen(); err != nil {
		return err
	}
	if t.interrupted || t.ctx.Err() != nil {
		return t.ctx.Err()
	}
	return &engine.Failure{Message: t.p.exitError().Error(), ExitCode: t.p.exitCode()}
}

// handle maps one frame; done is true at the turn's result.
func (t *turn) handle(f *frame) (done bool, err error) {
	switch f.Type {
	case frameSystem:
		if f.Subtype == "init" {
			t.s.mu.Lock()
			t.s.resumable = true
			t.s.forkFrom = "" // the fork exists now
			if f.Model != "" {
				t.s.model = f.Model
			}
			t.s.mu.Unlock()
		}
	case frameAssistant:
		t.track(f)
		return false, t.assistant(f)
	case frameUser:
		t.track(f)
		return false, t.user(f)
	case frameResult:
		return t.result(f)
	case frameStreamEvent:
		return false, t.streamEvent(f)
	}
	return false, nil
}

// subagent returns who wrote a frame: "" for the main agent, else the
// subagent's id (its agent_id, or its Task call's id).
func subagent(f *frame) (id, parent string) {
	parent = f.parent()
	if parent == "" {
		return "", ""
	}
	if f.AgentID != "" {
		return f.AgentID, parent
	}
	return parent, parent
}

func (t *turn) assistant(f *frame) error {
	var m apiMessage
	if err := json.Unmarshal(f.Message, &m); err != nil {
		t.s.log.Warn("assistant frame without a message", "error", err)
		return nil
	}
	subID, parent := subagent(f)
	model := m.Model
	if model == "" {
		model = t.s.Model()
	}
	if subID == "" && m.Usage != nil {
		t.s.mu.Lock()
		t.s.contextUsed = m.Usage.context()
		t.s.mu.Unlock()
	}
	for _, b := range m.blocks() {
		switch b.Type {
		case "text":
			if strings.TrimSpace(b.Text) == "" {
				continue
			}
			var ev protocol.Event = protocol.AssistantMessage{
				MessageID: m.ID, BlockType: protocol.BlockText, Text: b.Text, Model: model,
			}
			if subID != "" {
				ev = protocol.SubagentMessage{
					SubagentID: subID, SubagentType: f.SubagentType, ParentToolUseID: parent,
					MessageID: m.ID, Text: b.Text, Model: model,
				}
			}
			if err := t.s.host.Emit(ev); err != nil {
				return err
			}
		case "tool_use":
			input := b.Input
			if len(input) == 0 || string(input) == "null" {
				input = json.RawMessage("{}")
			}
			t.open[b.ID] = call{subagentID: subID, parent: parent}
			if b.Name == toolAskUserQuestion || b.Name == toolExitPlanMode {
				t.s.arm(t.ctx, b.Name, b.ID)
			}
			if err := t.s.host.Emit(protocol.AssistantMessage{
				MessageID: m.ID, BlockType: protocol.BlockToolUse, ToolUseID: b.ID, ToolName: b.Name,
				Input: input, Model: model, SubagentID: subID, ParentToolUseID: parent,
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (t *turn) user(f *frame) error {
	var m apiMessage
	if err := json.Unmarshal(f.Message, &m); err != nil {
		return nil
	}
	subID, parent := subagent(f)
	for _, b := range m.blocks() {
		if b.Type != "tool_result" || b.ToolUseID == "" || t.results[b.ToolUseID] {
			continue
		}
		if c, ok := t.open[b.ToolUseID]; ok {
			subID, parent = c.subagentID, c.parent
		}
		if err := t.toolResult(b.ToolUseID, resultText(b.Content), b.IsError, subID, parent); err != nil {
			return err
		}
	}
	return nil
}

func (t *turn) toolResult(id, content string, isError bool, subID, parent string) error {
	delete(t.open, id)
	t.results[id] = true
	if strings.TrimSpace(content) == "" {
		// A tool result is never empty (the domain requires content).
		content = "(no output)"
	}
	return t.s.host.Emit(protocol.ToolResult{
		ToolUseID: id, Content: content, IsError: isError, SubagentID: subID, ParentToolUseID: parent,
	})
}

// closeOpen gives every call still open an error result.
func (t *turn) closeOpen() error {
	for id, c := range t.open {
		if err := t.toolResult(id, interruptedToolUse, true, c.subagentID, c.parent); err != nil {
			return err
		}
	}
	return nil
}

// result ends the turn: one usage_update with what the turn cost (the
// CLI's total_cost_usd is cumulative), then the outcome. After an
// interrupt the result (error_during_execution) is an interrupted turn,
// not a failure.
func (t *turn) result(f *frame) (bool, error) {
	var r resultFrame
	if err := json.Unmarshal(f.raw, &r); err != nil {
		return true, &engine.Failure{Message: "claude wrote a result that cannot be read: " + err.Error()}
	}
	if r.UserMessageUUID != "" && r.UserMessageUUID != t.uuid {
		// The end of an earlier turn (one interrupted just as it ended).
		return false, nil
	}
	s := t.s
	s.mu.Lock()
	cost := r.TotalCostUSD - s.costBase
	if cost < 0 {
		cost = 0
	}
	s.costBase, s.haveTotal = r.TotalCostUSD, true
	used, model := s.contextUsed, s.modelLocked()
	s.mu.Unlock()
	var limit int64
	if mu, ok := r.ModelUsage[model]; ok {
		limit = mu.ContextWindow
	}
	err := s.host.Emit(protocol.UsageUpdate{
		Model: model, CostUSD: math.Round(cost*1e6) / 1e6,
		InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens,
		CacheReadTokens: r.Usage.CacheReadInputTokens, CacheWriteTokens: r.Usage.CacheCreationInputTokens,
		ContextWindowUsedTokens: used, ContextWindowMaxTokens: limit,
	})
	if err != nil {
		return true, err
	}
	if err := t.closeOpen(); err != nil {
		return true, err
	}
	if t.interrupted {
		return true, t.ctx.Err()
	}
	if r.Subtype != resultSuccess || r.IsError {
		msg := "claude ended the turn with " + r.Subtype
		detail := r.Result
		if len(r.Errors) > 0 {
			detail = strings.Join(r.Errors, "; ")
		}
		if detail != "" {
			msg += ": " + detail
		}
		return true, &engine.Failure{Message: msg}
	}
	return true, nil
}

// track remembers the uuid of a main-chain entry: the conversation's
// position after it.
func (t *turn) track(f *frame) {
	if f.UUID == "" || f.parent() != "" {
		return
	}
	t.s.mu.Lock()
	t.s.lastUUID = f.UUID
	t.s.mu.Unlock()
}
