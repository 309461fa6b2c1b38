package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/command"
)

// PendingPermissions are the tool uses of a session waiting for approval.
type PendingPermissions struct {
	SessionID uuid.UUID           `json:"sessionId" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	Items     []PermissionRequest `json:"items" nullable:"false" doc:"The requests waiting for your decision, oldest first."`
}

// PermissionDecisionRequest carries the message that goes with a decision.
type PermissionDecisionRequest struct {
	Message string `json:"message,omitempty" maxLength:"2000" doc:"A message for the agent about the decision." example:"Use the build directory under /tmp instead."`
}

type permissionsOutput struct {
	Body PendingPermissions
}

type permissionDecisionInput struct {
	ID        string `path:"id" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	RequestID string `path:"requestId" maxLength:"200" doc:"The permission request's id." example:"toolu_01A2B3C4"`
	Body      *PermissionDecisionRequest
}

// addPermissionRoutes registers the tool permission endpoints: the
// requests a session waits on, and the owner's decisions.
func (s *Server) addPermissionRoutes(api huma.API) {
	register(api, humanOp("list-session-permissions", http.MethodGet, "/api/agents/sessions/{id}/permissions",
		"List pending tool permissions", "The tool uses of the session that wait for your approval.", "Tool permissions", queryErrors),
		s.listPermissions)
	register(api, humanOp("allow-session-permission", http.MethodPost, "/api/agents/sessions/{id}/permissions/{requestId}/allow",
		"Allow a tool use", "Lets the pending tool use run (WaitingForApproval -> Running).", "Tool permissions", commandErrors),
		func(ctx context.Context, in *permissionDecisionInput) (*sessionOutput, error) {
			return s.decide(ctx, in, command.AllowPermission)
		})
	register(api, humanOp("deny-session-permission", http.MethodPost, "/api/agents/sessions/{id}/permissions/{requestId}/deny",
		"Deny a tool use", "Refuses the pending tool use; the agent goes on without it, with your message (WaitingForApproval -> Running).",
		"Tool permissions", commandErrors),
		func(ctx context.Context, in *permissionDecisionInput) (*sessionOutput, error) {
			return s.decide(ctx, in, command.DenyPermission)
		})
}

func (s *Server) listPermissions(ctx context.Context, in *sessionIDInput) (*permissionsOutput, error) {
	owner, id, err := s.readOwned(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	reqs, err := s.deps.Queries.PendingPermissions(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	out := &permissionsOutput{Body: PendingPermissions{SessionID: id, Items: make([]PermissionRequest, 0, len(reqs))}}
	for _, r := range reqs {
		out.Body.Items = append(out.Body.Items, permissionOf(r))
	}
	return out, nil
}

func (s *Server) decide(ctx context.Context, in *permissionDecisionInput, name string) (*sessionOutput, error) {
	data := command.PermissionDecisionData{RequestID: in.RequestID}
	if in.Body != nil {
		data.Message = in.Body.Message
	}
	return s.sessionCommand(ctx, in.ID, name, data, map[string]string{"requestId": "path.requestId"})
}
