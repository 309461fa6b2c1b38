package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres/queries"
)

// skillNamespace derives a new skill's id from the id of the command that
// creates it, so a repeated create names the same skill.
var skillNamespace = uuid.MustParse("b71e2c4d-8a3f-4e6b-9c5d-1e2f3a4b5c6d")

// SkillRequest creates a skill (CreateAgentSkillCommand).
type SkillRequest struct {
	Name                string                  `json:"name" minLength:"1" maxLength:"100" doc:"The skill's name, unique among your skills (ignoring case)." example:"HTTP retries"`
	Description         string                  `json:"description" minLength:"1" maxLength:"500" doc:"What the skill is for." example:"How we retry HTTP calls: backoff, jitter and idempotency."`
	Instructions        string                  `json:"instructions,omitempty" maxLength:"50000" doc:"The knowledge injected into the system prompt of the sessions that enable the skill." example:"Retry idempotent requests only, with exponential backoff and jitter."`
	ToolDefinitions     []ToolDefinitionRequest `json:"toolDefinitions,omitempty" maxItems:"50" doc:"The MCP tools the skill provides."`
	SubAgentDefinitions []SubAgentRequest       `json:"subAgentDefinitions,omitempty" maxItems:"20" doc:"The subagents the skill provides."`
}

// SubAgentRequest declares a subagent of a skill (SkillSubAgentDefinition).
type SubAgentRequest struct {
	Name            string                  `json:"name" minLength:"1" maxLength:"100" doc:"The subagent's name, unique within the skill." example:"test-runner"`
	Description     string                  `json:"description,omitempty" maxLength:"500" doc:"What the subagent does." example:"Runs the test suite and reports failures."`
	ModelID         string                  `json:"modelId" minLength:"1" maxLength:"200" doc:"The model the subagent runs on." example:"claude-haiku-4-5"`
	Instructions    string                  `json:"instructions,omitempty" maxLength:"50000" doc:"The subagent's own system prompt addition." example:"Run go test ./... and summarise the failures."`
	ToolDefinitions []ToolDefinitionRequest `json:"toolDefinitions,omitempty" maxItems:"50" doc:"The MCP tools of the subagent."`
}

// UpdateSkillRequest changes a skill's metadata or instructions; the
// fields left out keep their value.
type UpdateSkillRequest struct {
	Name         *string `json:"name,omitempty" minLength:"1" maxLength:"100" doc:"The new name, unique among your skills." example:"HTTP retries"`
	Description  *string `json:"description,omitempty" minLength:"1" maxLength:"500" doc:"The new description." example:"How we retry HTTP calls."`
	Instructions *string `json:"instructions,omitempty" maxLength:"50000" doc:"The new instructions; a manual edit keeps the skill's version." example:"Retry idempotent requests only."`
}

type createSkillInput struct {
	Body SkillRequest
}

type createSkillOutput struct {
	Location string `header:"Location" doc:"The new skill's URL." example:"/api/agents/skills/5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b"`
	Body     SkillDetail
}

type listSkillsInput struct {
	IsActive string `query:"isActive" enum:"true,false" doc:"Only the active (true) or deactivated (false) skills." example:"true"`
	Page     int    `query:"page" minimum:"1" default:"1" doc:"The page, from 1." example:"1"`
	PageSize int    `query:"pageSize" minimum:"1" maximum:"100" default:"20" doc:"Skills per page." example:"20"`
}

type skillIDInput struct {
	ID string `path:"id" format:"uuid" doc:"The skill's id." example:"5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b"`
}

type updateSkillInput struct {
	ID   string `path:"id" format:"uuid" doc:"The skill's id." example:"5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b"`
	Body UpdateSkillRequest
}

type memoryPillsInput struct {
	ID       string `path:"id" format:"uuid" doc:"The skill's id." example:"5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b"`
	Status   string `query:"status" enum:"Active,Consolidated,Dismissed" doc:"Only the pills in this status." example:"Active"`
	Page     int    `query:"page" minimum:"1" default:"1" doc:"The page, from 1." example:"1"`
	PageSize int    `query:"pageSize" minimum:"1" maximum:"100" default:"20" doc:"Pills per page." example:"20"`
}

type memoryPillInput struct {
	ID     string `path:"id" format:"uuid" doc:"The skill's id." example:"5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b"`
	PillID string `path:"pillId" format:"uuid" doc:"The memory pill's id." example:"8c9d0e1f-2a3b-4c4d-8e5f-6a7b8c9d0e1f"`
}

type skillListOutput struct{ Body SkillList }
type skillOutput struct{ Body SkillDetail }
type memoryPillListOutput struct{ Body MemoryPillList }

// addSkillRoutes registers the skill catalog: create, read, edit,
// (de)activate, memory pills and consolidation.
func (s *Server) addSkillRoutes(api huma.API) {
	create := humanOp("create-skill", http.MethodPost, "/api/agents/skills", "Create a skill",
		"Creates an active skill at version 1: instructions, MCP tools and subagents your sessions can enable.", "Skills", commandErrors)
	create.DefaultStatus = http.StatusCreated
	register(api, create, s.createSkill)
	register(api, humanOp("list-skills", http.MethodGet, "/api/agents/skills", "List your skills",
		"Your skills by name, optionally only the active or the deactivated ones.", "Skills", listErrors), s.listSkills)
	register(api, humanOp("get-skill", http.MethodGet, "/api/agents/skills/{id}", "Get a skill",
		"One of your skills with its instructions, tools, subagents and memory pills.", "Skills", queryErrors), s.getSkill)
	register(api, humanOp("update-skill", http.MethodPut, "/api/agents/skills/{id}", "Update a skill",
		"Changes the name, the description or the instructions; the fields left out keep their value. "+
			"A manual edit of the instructions keeps the skill's version.", "Skills", commandErrors), s.updateSkill)
	register(api, humanOp("deactivate-skill", http.MethodPost, "/api/agents/skills/{id}/deactivate", "Deactivate a skill",
		"New sessions can no longer enable the skill; sessions that have it keep it.", "Skills", commandErrors),
		func(ctx context.Context, in *skillIDInput) (*skillOutput, error) {
			return s.skillCatalogCommand(ctx, in.ID, command.DeactivateSkill, nil, nil)
		})
	register(api, humanOp("activate-skill", http.MethodPost, "/api/agents/skills/{id}/activate", "Activate a skill",
		"Lets sessions enable a deactivated skill again.", "Skills", commandErrors),
		func(ctx context.Context, in *skillIDInput) (*skillOutput, error) {
			return s.skillCatalogCommand(ctx, in.ID, command.ActivateSkill, nil, nil)
		})
	register(api, humanOp("list-memory-pills", http.MethodGet, "/api/agents/skills/{id}/memory-pills", "List a skill's memory pills",
		"The learnings agents recorded on one of your skills, newest first, optionally only those in one status.", "Skills", queryErrors), s.listMemoryPills)
	register(api, humanOp("dismiss-memory-pill", http.MethodDelete, "/api/agents/skills/{id}/memory-pills/{pillId}", "Dismiss a memory pill",
		"Dismisses an Active memory pill for good; answers the skill.", "Skills", commandErrors),
		func(ctx context.Context, in *memoryPillInput) (*skillOutput, error) {
			pill, err := parseID("path.pillId", in.PillID)
			if err != nil {
				return nil, err
			}
			return s.skillCatalogCommand(ctx, in.ID, command.DismissMemoryPill, command.PillData{PillID: pill},
				map[string]string{"pillId": "path.pillId"})
		})
	s.addConsolidationRoute(api)
}

func (s *Server) createSkill(ctx context.Context, in *createSkillInput) (*createSkillOutput, error) {
	b := in.Body
	tools, err := s.toolDefinitionsOf("toolDefinitions", b.ToolDefinitions)
	if err != nil {
		return nil, err
	}
	data := command.CreateSkillData{Name: b.Name, Description: b.Description, Instructions: b.Instructions, ToolDefinitions: tools}
	for i, sa := range b.SubAgentDefinitions {
		tools, err := s.toolDefinitionsOf(fmt.Sprintf("subAgentDefinitions[%d].toolDefinitions", i), sa.ToolDefinitions)
		if err != nil {
			return nil, err
		}
		data.SubAgentDefinitions = append(data.SubAgentDefinitions, command.SubAgentDefinition{Name: sa.Name,
			Description: sa.Description, ModelID: sa.ModelID, Instructions: sa.Instructions, ToolDefinitions: tools})
	}
	cmdID := CommandID(ctx)
	id := uuid.NewSHA1(skillNamespace, cmdID[:])
	raw, err := s.send(ctx, domain.AggregateSkill, command.CreateSkill, id, data, nil)
	if err != nil {
		return nil, err
	}
	snap, err := decodeState[command.SkillState](raw)
	if err != nil {
		return nil, err
	}
	return &createSkillOutput{Location: "/api/agents/skills/" + snap.ID.String(), Body: skillDetailOf(snap)}, nil
}

func (s *Server) listSkills(ctx context.Context, in *listSkillsInput) (*skillListOutput, error) {
	owner, err := s.reader(ctx)
	if err != nil {
		return nil, err
	}
	page, err := s.deps.Queries.ListSkills(ctx, queries.ListSkillsParams{Owner: owner, IsActive: isActiveFilter(in.IsActive),
		Paging: queries.Paging{Page: in.Page, PageSize: in.PageSize}})
	if err != nil {
		return nil, err
	}
	out := &skillListOutput{Body: SkillList{Items: make([]SkillSummary, 0, len(page.Items)),
		Total: page.Total, Page: page.Page, PageSize: page.PageSize}}
	for _, sk := range page.Items {
		out.Body.Items = append(out.Body.Items, SkillSummary{ID: sk.ID, Name: sk.Name, Description: sk.Description,
			Version: sk.Version, IsActive: sk.IsActive, ToolCount: sk.ToolCount, SubAgentCount: sk.SubAgentCount,
			ActivePillCount: sk.ActivePillCount, CreatedAt: sk.CreatedAt, UpdatedAt: sk.UpdatedAt})
	}
	return out, nil
}

func (s *Server) getSkill(ctx context.Context, in *skillIDInput) (*skillOutput, error) {
	owner, id, err := s.readOwned(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	snap, err := s.deps.Queries.Skill(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return &skillOutput{Body: skillDetailOf(snap)}, nil
}

func (s *Server) updateSkill(ctx context.Context, in *updateSkillInput) (*skillOutput, error) {
	b := in.Body
	return s.skillCatalogCommand(ctx, in.ID, command.UpdateSkill,
		command.UpdateSkillData{Name: b.Name, Description: b.Description, Instructions: b.Instructions}, nil)
}

func (s *Server) listMemoryPills(ctx context.Context, in *memoryPillsInput) (*memoryPillListOutput, error) {
	owner, id, err := s.readOwned(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	page, err := s.deps.Queries.MemoryPills(ctx, queries.MemoryPillsParams{Owner: owner, SkillID: id,
		Status: domain.MemoryPillStatus(in.Status), Paging: queries.Paging{Page: in.Page, PageSize: in.PageSize}})
	if err != nil {
		return nil, err
	}
	return &memoryPillListOutput{Body: MemoryPillList{Items: pillsOf(page.Items), Total: page.Total,
		Page: page.Page, PageSize: page.PageSize}}, nil
}

// skillCatalogCommand sends a skill command for the caller and answers
// the skill's new state.
func (s *Server) skillCatalogCommand(ctx context.Context, rawID, name string, data any, fields map[string]string) (*skillOutput, error) {
	id, err := parseID("path.id", rawID)
	if err != nil {
		return nil, err
	}
	raw, err := s.send(ctx, domain.AggregateSkill, name, id, data, fields)
	if err != nil {
		return nil, err
	}
	snap, err := decodeState[command.SkillState](raw)
	if err != nil {
		return nil, err
	}
	return &skillOutput{Body: skillDetailOf(snap)}, nil
}

// ConsolidateSkillRequest starts a consolidation session for a skill
// (StartSkillConsolidationCommand).
type ConsolidateSkillRequest struct {
	WorkingDirectory string  `json:"workingDirectory,omitempty" maxLength:"4096" doc:"Where the consolidation session works, inside your part of the workspace (relative to it or absolute); by default a new directory named after the session." example:"shop"`
	BudgetCapUsd     float64 `json:"budgetCapUsd" exclusiveMinimum:"0" maximum:"1000000" doc:"The most the session may spend, in US dollars." example:"2"`
	ModelID          string  `json:"modelId,omitempty" maxLength:"200" doc:"The model to run; claude-sonnet-4-5 by default." example:"claude-sonnet-4-5"`
}

// Consolidation is a started consolidation session.
type Consolidation struct {
	SkillID uuid.UUID     `json:"skillId" format:"uuid" doc:"The skill being improved." example:"5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b"`
	PillIDs []uuid.UUID   `json:"pillIds" nullable:"false" format:"uuid" doc:"The Active memory pills handed to the session, to fold into the instructions."`
	Session SessionDetail `json:"session" doc:"The consolidation session, Queued until a pool slot is free; it has the skill enabled."`
	APIKey  string        `json:"apiKey,omitempty" doc:"The session's agent API key, shown once (header X-Agent-Key)." example:"abk_Vd3hX0kq6l1m2n3o4p5q6r7s8t9u0v1w2x3y4z5A6B7"`
}

type consolidateSkillInput struct {
	ID   string `path:"id" format:"uuid" doc:"The skill's id." example:"5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b"`
	Body ConsolidateSkillRequest
}

type consolidationOutput struct {
	Location string `header:"Location" doc:"The consolidation session's URL." example:"/api/agents/sessions/0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	Body     Consolidation
}

func (s *Server) addConsolidationRoute(api huma.API) {
	op := humanOp("consolidate-skill", http.MethodPost, "/api/agents/skills/{id}/consolidate", "Start a skill consolidation session",
		"Starts a session with the Skill Improvement objective: it has the skill enabled and receives its Active memory pills, "+
			"to fold them into new instructions. Approving the session's output makes its agent's last message the skill's instructions, "+
			"marks those pills Consolidated (unless dismissed meanwhile) and raises the skill's version by one. "+
			"The skill must be active and have Active pills. "+
			"The session's agent API key is shown once: a repeat with the same Idempotency-Key returns the same session without it.",
		"Skills", commandErrors)
	op.DefaultStatus = http.StatusCreated
	op.Metadata = map[string]any{metaReplayByCommand: true}
	register(api, op, s.consolidateSkill)
}

func (s *Server) consolidateSkill(ctx context.Context, in *consolidateSkillInput) (*consolidationOutput, error) {
	owner, id, err := s.readOwned(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	sk, err := s.deps.Queries.Skill(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	if !sk.IsActive {
		return nil, NewKindError(KindConflict, "cannot consolidate: the skill is deactivated").WithCurrentStatus("Inactive")
	}
	budget, err := domain.USDFromFloat(in.Body.BudgetCapUsd)
	if err != nil {
		return nil, NewKindError(KindValidation, "budgetCapUsd must be a finite amount").WithField("budgetCapUsd")
	}
	objective, pills := consolidationObjective(sk)
	if len(pills) == 0 {
		return nil, NewKindError(KindConflict, "cannot consolidate: the skill has no Active memory pills").WithCurrentStatus("Active")
	}
	cmdID := CommandID(ctx)
	sessionID := uuid.NewSHA1(sessionNamespace, cmdID[:])
	dir, err := s.workingDirectory(ctx, in.Body.WorkingDirectory, sessionID)
	if err != nil {
		return nil, err
	}
	raw, err := s.send(ctx, domain.AggregateSession, command.StartSession, sessionID, command.StartSessionData{
		WorkingDirectory: dir, Objective: objective, SkillIDs: []uuid.UUID{sk.ID},
		ModelID: in.Body.ModelID, Name: "Consolidate skill " + sk.Name, BudgetCapUsd: budget,
		Consolidates: &command.SkillConsolidation{SkillID: sk.ID, PillIDs: pills},
	}, map[string]string{"budget.hardCapUsd": "budgetCapUsd"})
	if err != nil {
		return nil, err
	}
	res, err := decodeState[command.StartSessionResult](raw)
	if err != nil {
		return nil, err
	}
	return &consolidationOutput{Location: "/api/agents/sessions/" + res.Session.ID.String(), Body: Consolidation{
		SkillID: sk.ID, PillIDs: pills, Session: s.sessionDetail(res.Session), APIKey: res.APIKey}}, nil
}

// consolidationObjective is the Skill Improvement objective: the task,
// then the skill's Active pills, oldest first, as many as the objective's
// length allows. It returns the pills it holds; the rest wait for the
// next consolidation.
func consolidationObjective(sk domain.AgentSkillSnapshot) (string, []uuid.UUID) {
	var b strings.Builder
	fmt.Fprintf(&b, "Skill improvement: fold the memory pills below into the instructions of the skill %q (version %d), "+
		"which this session has enabled. Keep what still holds, merge duplicates, drop what the pills contradict, "+
		"and deliver the complete new instructions as your output.\n\nMemory pills:", sk.Name, sk.SkillVersion)
	var pills []uuid.UUID
	for _, p := range sk.MemoryPills {
		if p.Status != domain.PillActive {
			continue
		}
		line := fmt.Sprintf("\n- [%s] %s", p.Category, p.Content)
		room := domain.MaxObjectiveChars - utf8.RuneCountInString(b.String())
		if utf8.RuneCountInString(line) > room {
			if len(pills) > 0 {
				break
			}
			// A pill longer than the room left is cut rather than
			// leaving the session nothing to consolidate.
			line = string([]rune(line)[:room])
		}
		b.WriteString(line)
		pills = append(pills, p.ID)
	}
	return b.String(), pills
}
