package api

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres/queries"
)

// WaitingKind names what a session waits for.
type WaitingKind string

// The things a session waits for.
const (
	// WaitingForRunner: a free slot in the owner's pool (Queued).
	WaitingForRunner WaitingKind = "Runner"
	// WaitingForModel: the agent's next step, with no tool running.
	WaitingForModel WaitingKind = "Model"
	// WaitingForToolCall: a tool call to end.
	WaitingForToolCall WaitingKind = "ToolCall"
	// WaitingForSafePoint: the agent's next safe point, where the sidecar
	// acknowledges a pause, an interrupt or a cancellation.
	WaitingForSafePoint WaitingKind = "SafePoint"
	// WaitingForPermission: the owner's allow or deny of a tool use.
	WaitingForPermission WaitingKind = "Permission"
	// WaitingForAnswer: the owner's answer to the agent's question.
	WaitingForAnswer WaitingKind = "Answer"
	// WaitingForPlanDecision: the owner's approval or rejection of a plan.
	WaitingForPlanDecision WaitingKind = "PlanDecision"
	// WaitingForResume: the owner's resume of a paused session.
	WaitingForResume WaitingKind = "Resume"
	// WaitingForReview: the owner's approval or rejection of the output.
	WaitingForReview WaitingKind = "Review"
	// WaitingForMessage: the owner's next message to the agent.
	WaitingForMessage WaitingKind = "Message"
)

// WaitingFor is what a session waits for, since when, and until when
// when the wait ends by itself.
type WaitingFor struct {
	Kind     WaitingKind `json:"kind" enum:"Runner,Model,ToolCall,SafePoint,Permission,Answer,PlanDecision,Resume,Review,Message" doc:"What the session waits for." example:"ToolCall"`
	Detail   string      `json:"detail" doc:"What exactly, for people: the tool call, the question, the command awaiting approval." example:"Bash: make integration-test (the session pauses once it ends)"`
	ToolName string      `json:"toolName,omitempty" doc:"The tool, for a tool call or a permission." example:"Bash"`
	Since    *time.Time  `json:"since,omitempty" doc:"Since when it waits, when that is recorded." example:"2026-03-01T09:30:00Z"`
	Deadline *time.Time  `json:"deadline,omitempty" doc:"When the wait ends by itself (a permission's, a question's or a pause's timeout)." example:"2026-03-01T09:32:00Z"`
}

// waitingForOf derives what the session waits for from its state and,
// while its agent works, from the tool call its activity shows running.
func waitingForOf(s domain.AgentSessionSnapshot, running *queries.RunningTool) *WaitingFor {
	updated := s.UpdatedAt
	switch s.Status {
	case domain.StatusQueued:
		return &WaitingFor{Kind: WaitingForRunner, Detail: "a free slot in your session pool", Since: &s.CreatedAt}
	case domain.StatusRunning:
		if running != nil {
			return toolWait(running, "")
		}
		return &WaitingFor{Kind: WaitingForModel, Detail: "the agent's next step"}
	case domain.StatusPausing, domain.StatusInterrupting, domain.StatusCancelling:
		verb := map[domain.SessionStatus]string{domain.StatusPausing: "pauses", domain.StatusInterrupting: "stops",
			domain.StatusCancelling: "is cancelled"}[s.Status]
		if running != nil {
			return toolWait(running, " (the session "+verb+" once it ends)")
		}
		return &WaitingFor{Kind: WaitingForSafePoint, Detail: "the agent's next safe point, where the session " + verb, Since: &updated}
	case domain.StatusResuming:
		return &WaitingFor{Kind: WaitingForSafePoint, Detail: "the sidecar to resume the agent", Since: &updated}
	case domain.StatusWaitingForInput:
		if q := s.PendingQuestion; q != nil {
			return &WaitingFor{Kind: WaitingForAnswer, Detail: q.Content, Since: &q.AskedAt, Deadline: &q.ExpiresAt}
		}
	case domain.StatusWaitingForApproval:
		if p := s.PendingPermission; p != nil {
			return &WaitingFor{Kind: WaitingForPermission, Detail: toolText(p.ToolName, p.Input), ToolName: p.ToolName,
				Since: &p.AskedAt, Deadline: &p.ExpiresAt}
		}
		if p := s.Plan; p != nil && p.Status == domain.PlanPendingApproval {
			return &WaitingFor{Kind: WaitingForPlanDecision, Detail: firstLine(p.Content), Since: &p.CreatedAt}
		}
	case domain.StatusPaused:
		w := &WaitingFor{Kind: WaitingForResume, Detail: "you to resume it", Since: s.PausedAt}
		if s.PausedAt != nil && s.Timeouts.Pause > 0 {
			deadline := s.PausedAt.Add(s.Timeouts.Pause)
			w.Deadline = &deadline
		}
		return w
	case domain.StatusIdle:
		if s.HasPendingReview {
			return &WaitingFor{Kind: WaitingForReview, Detail: "your review of its output", Since: s.Metrics.LastTurnAt}
		}
		return &WaitingFor{Kind: WaitingForMessage, Detail: "your next message", Since: s.Metrics.LastTurnAt}
	case domain.StatusInterrupted:
		return &WaitingFor{Kind: WaitingForMessage, Detail: "your next message", Since: &updated}
	}
	return nil
}

func toolWait(t *queries.RunningTool, then string) *WaitingFor {
	started := t.StartedAt
	return &WaitingFor{Kind: WaitingForToolCall, Detail: toolText(t.ToolName, t.Input) + then, ToolName: t.ToolName, Since: &started}
}

// toolText is a tool use for people: the tool and its command, file or
// pattern, else the tool alone.
func toolText(name, input string) string {
	var in map[string]any
	_ = json.Unmarshal([]byte(input), &in)
	for _, key := range []string{"command", "file_path", "pattern", "url", "description"} {
		if v, ok := in[key].(string); ok && v != "" {
			return name + ": " + firstLine(v)
		}
	}
	return name
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// withWaitingFor adds to d what the session waits for, reading the tool
// call running while its agent works (when the API has its read side).
func (s *Server) withWaitingFor(ctx context.Context, snap domain.AgentSessionSnapshot, d *SessionDetail) error {
	var running *queries.RunningTool
	if working[snap.Status] && s.deps.Queries != nil {
		var err error
		if running, err = s.deps.Queries.RunningTool(ctx, snap.ID); err != nil {
			return err
		}
	}
	d.WaitingFor = waitingForOf(snap, running)
	return nil
}

// working are the statuses in which the agent may be running a tool.
var working = map[domain.SessionStatus]bool{
	domain.StatusRunning: true, domain.StatusPausing: true, domain.StatusInterrupting: true, domain.StatusCancelling: true,
}
