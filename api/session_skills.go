package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/agentbus/agentbus/command"
)

type sessionSkillInput struct {
	ID      string `path:"id" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	SkillID string `path:"skillId" format:"uuid" doc:"The skill's id." example:"5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b"`
}

// addSessionSkillRoutes registers enabling and disabling a skill on a
// session. Both need an Idle or Interrupted session, and
// the agent reloads its composed configuration at once.
func (s *Server) addSessionSkillRoutes(api huma.API) {
	register(api, humanOp("enable-session-skill", http.MethodPost, "/api/agents/sessions/{id}/skills/{skillId}/enable",
		"Enable a skill on a session", "Hot-loads one of your active skills into an Idle or Interrupted session; its agent reloads the composed configuration.",
		"Session control", commandErrors),
		func(ctx context.Context, in *sessionSkillInput) (*sessionOutput, error) {
			return s.skillCommand(ctx, in, command.EnableSkill)
		})
	register(api, humanOp("disable-session-skill", http.MethodDelete, "/api/agents/sessions/{id}/skills/{skillId}",
		"Disable a skill on a session", "Removes a skill from an Idle or Interrupted session; its agent reloads the composed configuration.",
		"Session control", commandErrors),
		func(ctx context.Context, in *sessionSkillInput) (*sessionOutput, error) {
			return s.skillCommand(ctx, in, command.DisableSkill)
		})
}

func (s *Server) skillCommand(ctx context.Context, in *sessionSkillInput, name string) (*sessionOutput, error) {
	skill, err := parseID("path.skillId", in.SkillID)
	if err != nil {
		return nil, err
	}
	return s.sessionCommand(ctx, in.ID, name, command.SkillData{SkillID: skill}, map[string]string{"skillId": "path.skillId"})
}
