package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/agentbus/agentbus/command"
)

// addForceCancelRoute registers the cancel that does not wait for the
// agent to stop (seed 004's cancel with force).
func (s *Server) addForceCancelRoute(api huma.API) {
	register(api, humanOp("force-cancel-session", http.MethodPost, "/api/agents/sessions/{id}/force-cancel", "Force-cancel a session",
		"Stops the session for good without letting its agent finish the running tool: the agent is abandoned at once "+
			"(-> Cancelling; Cancelled once the sidecar ended). A Queued session is Cancelled at once.", "Session control", commandErrors),
		func(ctx context.Context, in *sessionIDInput) (*sessionOutput, error) {
			return s.sessionCommand(ctx, in.ID, command.CancelSession, command.CancelData{Force: true}, nil)
		})
}
