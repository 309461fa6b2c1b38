package sidecar

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/sidecar/engine"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// The runner is the engine's Host.
var _ engine.Host = (*runner)(nil)

// engineEvents are the event types an engine may write; the sidecar writes
// all others itself.
var engineEvents = map[string]bool{
	protocol.EventAssistantMessage: true,
	protocol.EventTextDelta:        true,
	protocol.EventToolResult:       true,
	protocol.EventSubagentMessage:  true,
	protocol.EventUsageUpdate:      true,
	protocol.EventVoluntaryHandoff: true,
}

// Emit writes a content event and watches usage and handoffs.
func (r *runner) Emit(ev protocol.Event) error {
	if !engineEvents[ev.EventType()] {
		return fmt.Errorf("sidecar: an engine may not write %s", ev.EventType())
	}
	if err := r.out.emit(ev); err != nil {
		return err
	}
	switch e := ev.(type) {
	case protocol.UsageUpdate:
		r.observeUsage(e)
	case protocol.VoluntaryHandoff:
		r.mu.Lock()
		r.handoff = &e
		r.mu.Unlock()
	}
	return nil
}

// observeUsage keeps the turn's cost and monitors the main agent's context
// window: context_nearing_limit once the warning threshold is crossed (again
// after the context shrank below it), and at the limit the turn is cut short
// for the exhaustion sequence.
func (r *runner) observeUsage(u protocol.UsageUpdate) {
	r.mu.Lock()
	r.turnCost += u.CostUSD
	r.totalCost += u.CostUSD
	if u.IsSubagent {
		r.mu.Unlock()
		return
	}
	limit := u.ContextWindowMaxTokens
	if limit <= 0 {
		limit = r.cfg.Context.MaxTokens
	}
	r.contextUsed, r.contextMax = u.ContextWindowUsedTokens, limit
	pct, warnAt := percent(r.contextUsed, limit), r.cfg.Context.WarnPercent
	var warn *protocol.ContextNearingLimit
	switch {
	case pct < warnAt:
		r.warned = false
	case !r.warned:
		r.warned = true
		warn = &protocol.ContextNearingLimit{Percent: pct, ThresholdPercent: warnAt, UsedTokens: r.contextUsed, MaxTokens: limit}
	}
	if r.contextUsed >= limit && !r.exhausted {
		r.exhausted = true
		if r.turnCancel != nil {
			r.turnCancel(errExhausted)
		}
	}
	r.mu.Unlock()
	if warn != nil {
		r.emitLog(*warn)
	}
}

// beginWait registers an engine call waiting for a person: a paused session
// is at rest while it waits, so a pending pause is acknowledged.
func (r *runner) beginWait(register func()) {
	r.mu.Lock()
	register()
	r.waiting++
	r.atRestLocked()
}

func (r *runner) endWait(unregister func()) {
	r.mu.Lock()
	unregister()
	r.waiting--
	r.mu.Unlock()
}

// CanUseTool applies the permission policy: a tool that needs approval
// waits for a permission_response and is denied when none comes in time; a
// tool outside a non-empty allowed_tools list is denied at once.
func (r *runner) CanUseTool(ctx context.Context, req engine.ToolRequest) (engine.Permission, error) {
	cfg := r.config()
	policy := cfg.PermissionPolicy
	if !req.AlwaysAsk && !policy.NeedsApproval(req.ToolName) {
		if len(cfg.AllowedTools) > 0 && !slices.Contains(cfg.AllowedTools, req.ToolName) {
			return engine.Permission{Message: "the tool is not among the session's allowed tools"}, nil
		}
		return engine.Permission{Allow: true}, nil
	}
	id := uuid.NewString()
	ch := make(chan engine.Permission, 1)
	r.beginWait(func() { r.perms[id] = ch })
	defer r.endWait(func() { delete(r.perms, id) })
	timeout := policy.Timeout()
	input := req.Input
	if len(input) == 0 {
		input = []byte("{}")
	}
	if err := r.out.emit(protocol.PermissionRequest{
		RequestID: id, ToolUseID: req.ToolUseID, ToolName: req.ToolName, Input: input,
		TimeoutMS: timeout.Milliseconds(), SubagentID: req.SubagentID,
	}); err != nil {
		return engine.Permission{}, err
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case p := <-ch:
		return p, nil
	case <-t.C:
		return engine.Permission{Message: fmt.Sprintf("no permission_response within %s", timeout)}, nil
	case <-ctx.Done():
		return engine.Permission{}, ctx.Err()
	}
}

// AwaitAnswer waits for the answer_question of an AskUserQuestion call.
func (r *runner) AwaitAnswer(ctx context.Context, toolUseID string) (string, error) {
	ch := make(chan string, 1)
	r.beginWait(func() { r.questions[toolUseID] = ch })
	defer r.endWait(func() { delete(r.questions, toolUseID) })
	select {
	case a := <-ch:
		return a, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// AwaitPlanDecision waits for the plan_decision of an ExitPlanMode call.
func (r *runner) AwaitPlanDecision(ctx context.Context, toolUseID string) (engine.PlanDecision, error) {
	if r.config().PermissionPolicy.AutoApprovePlans {
		return engine.PlanDecision{Approved: true}, nil
	}
	ch := make(chan engine.PlanDecision, 1)
	r.beginWait(func() { r.plans[toolUseID] = ch })
	defer r.endWait(func() { delete(r.plans, toolUseID) })
	select {
	case d := <-ch:
		return d, nil
	case <-ctx.Done():
		return engine.PlanDecision{}, ctx.Err()
	}
}
