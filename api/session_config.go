package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/agentbus/agentbus/domain"
)

// SessionConfig is the configuration a session's agent runs with, composed
// from its template and enabled skills (seed 001: the template's prompt,
// then each skill's instructions; the union of their tools). It holds no
// keys.
type SessionConfig struct {
	ModelID              string           `json:"modelId" doc:"The model the agent runs on." example:"claude-sonnet-4-5"`
	SystemPrompt         string           `json:"systemPrompt" doc:"The template's system prompt, then each enabled skill's instructions, in order." example:"You are a careful Go engineer.\n\nWrite the test first."`
	AllowedTools         []string         `json:"allowedTools" nullable:"false" doc:"The tools the agent may use: the template's, then every MCP tool's." example:"[\"Read\",\"search_tickets\"]"`
	MCPTools             []ToolDefinition `json:"mcpTools" nullable:"false" doc:"The MCP tools of the template, then of each skill; on a name clash the first wins."`
	SubAgents            []SubAgent       `json:"subAgents" nullable:"false" doc:"The subagents of the enabled skills; on a name clash the first wins."`
	PlanApprovalRequired bool             `json:"planApprovalRequired" doc:"Whether a plan waits for the owner's approval." example:"false"`
	ToolApproval         ToolApproval     `json:"toolApproval" doc:"Which tool uses wait for the owner's approval."`
}

type sessionConfigOutput struct{ Body SessionConfig }

// addSessionConfigRoutes registers reading a session's effective
// configuration.
func (s *Server) addSessionConfigRoutes(api huma.API) {
	register(api, humanOp("get-session-config", http.MethodGet, "/api/agents/sessions/{id}/config", "Get a session's configuration",
		"The configuration the session's agent runs with: system prompt, allowed tools, MCP tools and subagents, composed from its template and enabled skills.",
		"Sessions", queryErrors), s.getSessionConfig)
}

func (s *Server) getSessionConfig(ctx context.Context, in *sessionIDInput) (*sessionConfigOutput, error) {
	owner, id, err := s.readOwned(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	cfg, err := s.deps.Queries.SessionConfig(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return &sessionConfigOutput{Body: sessionConfigOf(cfg)}, nil
}

func sessionConfigOf(c domain.EffectiveConfig) SessionConfig {
	out := SessionConfig{ModelID: c.ModelID, SystemPrompt: c.SystemPrompt, AllowedTools: c.AllowedTools,
		MCPTools: toolsOf(c.MCPTools), SubAgents: subAgentsOf(c.SubAgents),
		PlanApprovalRequired: c.PlanApprovalRequired, ToolApproval: toolApprovalOf(c.ToolApproval)}
	if out.AllowedTools == nil {
		out.AllowedTools = []string{}
	}
	return out
}
