package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
)

type agentOutputInput struct {
	ID   string `path:"id" format:"uuid" doc:"The agent's own session id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	Body Output
}

// addAgentRoutes registers the agent API: endpoints an agent calls with
// its session's API key, each on its own session only.
func (s *Server) addAgentRoutes(api huma.API) {
	register(api, huma.Operation{
		OperationID: "agent-record-output", Method: http.MethodPost, Path: "/api/agent/sessions/{id}/output",
		Summary: "Signal completion with an output summary",
		Description: "Called by the agent when its turn delivered work: records the output summary and ends the turn " +
			"(Running -> Idle with hasPendingReview), so the owner can approve or reject it.",
		Tags: []string{"Agent API"}, Security: AgentAuth, Errors: commandErrors,
	}, func(ctx context.Context, in *agentOutputInput) (*sessionOutput, error) {
		o := in.Body
		return s.sessionCommand(ctx, in.ID, command.RecordAgentOutput, command.OutputData{Output: domain.SessionOutput{
			OutputLineCount: o.OutputLineCount, FilesChanged: o.FilesChanged, TestsAdded: o.TestsAdded,
			AllTestsPassing: o.AllTestsPassing, CommitSha: o.CommitSha}}, nil)
	})
	s.addAgentWorkRoutes(api)
}
