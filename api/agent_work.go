package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
)

// AgentTaskRequest is a follow-up task an agent creates (AgentCreateTaskCommand).
type AgentTaskRequest struct {
	Title        string     `json:"title" minLength:"1" maxLength:"200" doc:"What the task is about." example:"Add retries to the webhook client"`
	Description  string     `json:"description,omitempty" maxLength:"4000" doc:"What to do, and why." example:"The webhook client gives up on the first 503; the payment callbacks need retries with backoff."`
	Priority     string     `json:"priority,omitempty" enum:"Low,Medium,High,Urgent" doc:"How urgent the task is; Medium by default." example:"High"`
	Tags         []string   `json:"tags,omitempty" maxItems:"10" doc:"Labels for the task, each 1-50 characters; repeats are dropped." example:"[\"http\",\"follow-up\"]"`
	LinkedTaskID *uuid.UUID `json:"linkedTaskId,omitempty" format:"uuid" doc:"The task the new one follows up on, if any." example:"2f4e6a8c-0b1d-4f3e-9a5c-7e9b1d3f5a7c"`
}

// AgentTask is the follow-up task an agent created. The task context
// creates it under this id on the event the session raised.
type AgentTask struct {
	ID           uuid.UUID  `json:"id" format:"uuid" doc:"The new task's id." example:"6a8c0e2f-4b6d-4f8a-9c1e-3a5b7d9f1b3d"`
	SessionID    uuid.UUID  `json:"sessionId" format:"uuid" doc:"The agent's session, which the task is linked back to." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	Title        string     `json:"title" doc:"What the task is about, trimmed." example:"Add retries to the webhook client"`
	Description  string     `json:"description,omitempty" doc:"What to do, and why." example:"The webhook client gives up on the first 503; the payment callbacks need retries with backoff."`
	Priority     string     `json:"priority" enum:"Low,Medium,High,Urgent" doc:"How urgent the task is." example:"High"`
	Tags         []string   `json:"tags,omitempty" doc:"Labels for the task." example:"[\"http\",\"follow-up\"]"`
	LinkedTaskID *uuid.UUID `json:"linkedTaskId,omitempty" format:"uuid" doc:"The task the new one follows up on." example:"2f4e6a8c-0b1d-4f3e-9a5c-7e9b1d3f5a7c"`
}

// AgentHandoffRequest is an agent's voluntary handoff and its handoff document.
type AgentHandoffRequest struct {
	Reason        string `json:"reason" minLength:"1" maxLength:"4000" doc:"Why the agent hands off although context remains." example:"Context polluted by failed approaches"`
	Summary       string `json:"summary" minLength:"1" maxLength:"4000" doc:"What was done so far." example:"Tried two fixes for the flaky TestCache; both failed."`
	RemainingWork string `json:"remainingWork" minLength:"1" maxLength:"4000" doc:"What the next session must do." example:"Find the race in service/cache.go that makes TestCache flaky."`
	KeyDecisions  string `json:"keyDecisions,omitempty" maxLength:"4000" doc:"Decisions the next session must keep." example:"Do not retry the mutex-per-key approach; it deadlocks."`
}

// AgentHandoff is the result of a voluntary handoff: the stopped session, in
// its chain, and the document that waits for the next session.
type AgentHandoff struct {
	Session           SessionDetail `json:"session" doc:"The session, now ContextExhausted and in a chain."`
	HandoffDocumentID uuid.UUID     `json:"handoffDocumentId" format:"uuid" doc:"The handoff document the continuation session starts from." example:"4c6e8a0b-2d4f-4a6c-8e0a-2c4e6a8c0e2f"`
}

// AgentMemoryPillRequest is a learning an agent records on a skill.
type AgentMemoryPillRequest struct {
	Content  string `json:"content" minLength:"1" maxLength:"2000" doc:"The learning: a tip, a mistake to avoid, a guideline, a pattern or a convention." example:"go test -race catches the map race in the cache tests."`
	Category string `json:"category" enum:"Mistake,Tip,Guideline,Pattern,Convention" doc:"What kind of learning it is." example:"Tip"`
}

// AgentMemoryPill is a memory pill an agent recorded.
type AgentMemoryPill struct {
	ID        uuid.UUID `json:"id" format:"uuid" doc:"The pill's id." example:"8e0a2c4e-6a8c-4e0a-9c2e-4a6c8e0a2c4e"`
	SkillID   uuid.UUID `json:"skillId" format:"uuid" doc:"The skill it belongs to." example:"5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b"`
	SessionID uuid.UUID `json:"sessionId" format:"uuid" doc:"The session that recorded it." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	Content   string    `json:"content" doc:"The learning, trimmed." example:"go test -race catches the map race in the cache tests."`
	Category  string    `json:"category" enum:"Mistake,Tip,Guideline,Pattern,Convention" doc:"What kind of learning it is." example:"Tip"`
	Status    string    `json:"status" enum:"Active,Consolidated,Dismissed" doc:"Always Active: it waits for the owner to consolidate or dismiss it." example:"Active"`
	CreatedAt time.Time `json:"createdAt" doc:"When it was recorded." example:"2026-03-01T09:00:05Z"`
}

type agentTaskInput struct {
	Body AgentTaskRequest
}

type agentHandoffInput struct {
	ID   string `path:"id" format:"uuid" doc:"The agent's own session id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	Body AgentHandoffRequest
}

type agentMemoryPillInput struct {
	SkillID string `path:"skillId" format:"uuid" doc:"A skill enabled on the agent's session." example:"5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b"`
	Body    AgentMemoryPillRequest
}

type agentTaskOutput struct{ Body AgentTask }
type agentHandoffOutput struct{ Body AgentHandoff }
type agentMemoryPillOutput struct{ Body AgentMemoryPill }

func agentOp(id, method, path, summary, description string, status int) huma.Operation {
	return huma.Operation{OperationID: id, Method: method, Path: path, Summary: summary, Description: description,
		Tags: []string{"Agent API"}, Security: AgentAuth, Errors: commandErrors, DefaultStatus: status}
}

// addAgentWorkRoutes registers the agent's follow-up tasks, its voluntary
// handoff and its memory pills.
func (s *Server) addAgentWorkRoutes(api huma.API) {
	register(api, agentOp("agent-create-task", http.MethodPost, "/api/agent/tasks", "Create a follow-up task",
		"Called by a Running agent to create a follow-up task linked back to its session. The task context creates the task "+
			"under the returned id; a repeat with the same Idempotency-Key returns the same task.", http.StatusCreated), s.createAgentTask)
	register(api, agentOp("agent-handoff", http.MethodPost, "/api/agent/sessions/{id}/handoff", "Hand off to a new session",
		"Called by a Running agent that chooses to hand its work over although context remains: the session stops "+
			"(ContextExhausted), its chain (created if it has none) receives the handoff document, and a new session of the chain "+
			"continues the work from it.", http.StatusOK), s.agentHandOff)
	register(api, agentOp("agent-record-memory-pill", http.MethodPost, "/api/agent/skills/{skillId}/memory-pills", "Record a memory pill",
		"Called by a Running agent to record a learning on one of the skills enabled on its session (403 for any other skill), "+
			"for the owner to consolidate into the skill's instructions or dismiss.", http.StatusCreated), s.recordAgentMemoryPill)
}

// agentSession returns the calling agent's session.
func agentSession(ctx context.Context) (uuid.UUID, error) {
	p, ok := PrincipalFrom(ctx)
	if !ok || !p.IsAgent() {
		return uuid.Nil, NewKindError(KindUnauthorized, "an agent key is required")
	}
	return p.SessionID, nil
}

// inBody names a refused command's field as the request body's.
func inBody(err error) error {
	var e *command.Error
	if errors.As(err, &e) && e.Field != "" {
		e.Field = "body." + e.Field
	}
	return err
}

func (s *Server) createAgentTask(ctx context.Context, in *agentTaskInput) (*agentTaskOutput, error) {
	id, err := agentSession(ctx)
	if err != nil {
		return nil, err
	}
	b := in.Body
	raw, err := s.send(ctx, domain.AggregateSession, command.CreateAgentTask, id, command.AgentTaskData{Title: b.Title,
		Description: b.Description, Priority: b.Priority, Tags: b.Tags, LinkedTaskID: b.LinkedTaskID}, nil)
	if err != nil {
		return nil, inBody(err)
	}
	res, err := decodeState[command.AgentTaskResult](raw)
	if err != nil {
		return nil, err
	}
	t := res.Task
	return &agentTaskOutput{Body: AgentTask{ID: res.TaskID, SessionID: res.SessionID, Title: t.Title, Description: t.Description,
		Priority: t.Priority, Tags: t.Tags, LinkedTaskID: t.LinkedTaskID}}, nil
}

func (s *Server) agentHandOff(ctx context.Context, in *agentHandoffInput) (*agentHandoffOutput, error) {
	id, err := parseID("path.id", in.ID)
	if err != nil {
		return nil, err
	}
	b := in.Body
	raw, err := s.send(ctx, domain.AggregateSession, command.HandOff, id, command.HandOffData{Reason: b.Reason, Summary: b.Summary,
		RemainingWork: b.RemainingWork, KeyDecisions: b.KeyDecisions}, nil)
	if err != nil {
		return nil, inBody(err)
	}
	res, err := decodeState[command.HandOffResult](raw)
	if err != nil {
		return nil, err
	}
	return &agentHandoffOutput{Body: AgentHandoff{Session: s.sessionDetail(res.Session), HandoffDocumentID: res.HandoffDocument.ID}}, nil
}

func (s *Server) recordAgentMemoryPill(ctx context.Context, in *agentMemoryPillInput) (*agentMemoryPillOutput, error) {
	session, err := agentSession(ctx)
	if err != nil {
		return nil, err
	}
	skill, err := parseID("path.skillId", in.SkillID)
	if err != nil {
		return nil, err
	}
	raw, err := s.send(ctx, domain.AggregateSkill, command.RecordAgentMemoryPill, skill, command.RecordMemoryPillData{
		SessionID: session, Content: in.Body.Content, Category: domain.MemoryPillCategory(in.Body.Category)}, nil)
	if err != nil {
		return nil, inBody(err)
	}
	res, err := decodeState[command.MemoryPillResult](raw)
	if err != nil {
		return nil, err
	}
	p := res.Pill
	return &agentMemoryPillOutput{Body: AgentMemoryPill{ID: p.ID, SkillID: p.SkillID, SessionID: p.SessionID, Content: p.Content,
		Category: string(p.Category), Status: string(p.Status), CreatedAt: p.CreatedAt}}, nil
}
