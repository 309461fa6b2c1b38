package reactions

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// permissionFallback is how much later than the session's own permission
// timeout a sidecar denies an unanswered tool call by itself: the session
// decides, and the sidecar's timer only covers a control plane that is
// gone.
const permissionFallback = 30 * time.Second

// sidecarConfig composes what the sidecar of s needs to know: the
// session's own settings and the config composed from its template and
// enabled skills. An empty engine leaves the sidecar's own (a reload). The
// sidecar stays idle between turns, waiting for the session's next
// message, until its session is over.
func sidecarConfig(ctx context.Context, q postgres.Querier, s *domain.AgentSession, engine string) (protocol.Config, error) {
	eff, err := postgres.ComposeSessionConfig(ctx, q, s)
	if err != nil {
		return protocol.Config{}, fmt.Errorf("compose the config of session %s: %w", s.ID(), err)
	}
	cfg := protocol.Config{
		SessionID: s.ID().String(), Engine: engine, Model: s.ModelID(),
		WorkingDirectory: s.WorkingDirectory(), Objective: objective(s), StayIdle: true, Attempt: s.RetryCount(),
		SystemPrompt: eff.SystemPrompt, AllowedTools: eff.AllowedTools,
		MCPTools: mcpTools(eff.MCPTools), Subagents: subagents(eff.SubAgents),
	}
	policy := eff.ToolApproval
	switch policy.Mode {
	case domain.ApprovalAll:
		cfg.PermissionPolicy.RequireApproval = []string{"*"}
	case domain.ApprovalList:
		cfg.PermissionPolicy.RequireApproval = policy.Tools
	}
	timeout := policy.Timeout
	if timeout <= 0 {
		timeout = domain.DefaultPermissionTimeout
	}
	cfg.PermissionPolicy.TimeoutMS = (timeout + permissionFallback).Milliseconds()
	if chain := s.ChainID(); chain != nil {
		cfg.ChainID = chain.String()
	}
	return cfg, nil
}

// objective is the first turn's input of the session's current run: a
// retried run is also told the instruction its retry came with.
func objective(s *domain.AgentSession) string {
	if s.RetryCount() == 0 || s.RetryInstruction() == "" {
		return s.Objective()
	}
	return s.Objective() + "\n\n" + s.RetryInstruction()
}

func mcpTools(defs []domain.MCPToolDefinition) []protocol.MCPTool {
	if len(defs) == 0 {
		return nil
	}
	tools := make([]protocol.MCPTool, 0, len(defs))
	for _, d := range defs {
		t := protocol.MCPTool{Name: d.Name, Description: d.Description, ServerURI: d.ServerURI}
		if d.InputSchema != "" && json.Valid([]byte(d.InputSchema)) {
			t.InputSchema = json.RawMessage(d.InputSchema)
		}
		tools = append(tools, t)
	}
	return tools
}

func subagents(defs []domain.SkillSubAgentDefinition) []protocol.Subagent {
	if len(defs) == 0 {
		return nil
	}
	out := make([]protocol.Subagent, 0, len(defs))
	for _, d := range defs {
		out = append(out, protocol.Subagent{Name: d.Name, Description: d.Description, Model: d.ModelID,
			Instructions: d.Instructions, Tools: mcpTools(d.ToolDefinitions)})
	}
	return out
}
