package api

import (
	"context"
	"crypto/rand"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/handlers/webhooks"
	"github.com/agentbus/agentbus/internal/netguard"
	"github.com/agentbus/agentbus/postgres"
)

// WebhookRequest creates a webhook.
type WebhookRequest struct {
	URL         string     `json:"url" minLength:"1" maxLength:"2000" doc:"Where to post the events: an https URL that points to no cloud metadata service, link-local address or (unless the operator allows them, and http with them) loopback or private address." example:"https://hooks.example.com/agentbus"`
	Description string     `json:"description,omitempty" maxLength:"500" doc:"What the webhook is for." example:"Chat alerts"`
	EventTypes  []string   `json:"eventTypes,omitempty" maxItems:"100" doc:"The session event types to deliver; none for every one." example:"[\"session_waiting_for_input\",\"agent_session_failed\",\"agent_session_output_ready\",\"agent_session_approved\",\"session_budget_warning\"]"`
	SessionID   *uuid.UUID `json:"sessionId,omitempty" format:"uuid" doc:"Only this session of yours." example:"3f2a1b0c-9d8e-4f7a-b6c5-d4e3f2a1b0c9"`
	TemplateID  *uuid.UUID `json:"templateId,omitempty" format:"uuid" doc:"Only the sessions of this template of yours." example:"3c9d2e1f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"`
	Enabled     *bool      `json:"enabled,omitempty" doc:"Whether events are delivered; true by default." example:"true"`
}

// UpdateWebhookRequest changes a webhook; the fields left out keep their
// value.
type UpdateWebhookRequest struct {
	URL         *string  `json:"url,omitempty" minLength:"1" maxLength:"2000" doc:"The new URL." example:"https://hooks.example.com/agentbus"`
	Description *string  `json:"description,omitempty" maxLength:"500" doc:"The new description." example:"Chat alerts"`
	EventTypes  []string `json:"eventTypes,omitempty" maxItems:"100" doc:"The new event types; [] for every one." example:"[\"agent_session_failed\"]"`
	Enabled     *bool    `json:"enabled,omitempty" doc:"Enable or disable the webhook. Enabling it clears the failures that disabled it." example:"false"`
}

// RotateWebhookRequest rotates a webhook's secret.
type RotateWebhookRequest struct {
	GraceSeconds *int64 `json:"graceSeconds,omitempty" minimum:"0" maximum:"604800" doc:"How long the replaced secret still signs deliveries, beside the new one; 86400 by default, 0 to stop at once." example:"86400"`
}

type createWebhookInput struct {
	Body WebhookRequest
}

type webhookIDInput struct {
	ID string `path:"id" format:"uuid" doc:"The webhook's id." example:"7d3c2b1a-0f9e-4d8c-b7a6-5e4f3d2c1b0a"`
}

type updateWebhookInput struct {
	ID   string `path:"id" format:"uuid" doc:"The webhook's id." example:"7d3c2b1a-0f9e-4d8c-b7a6-5e4f3d2c1b0a"`
	Body UpdateWebhookRequest
}

type rotateWebhookInput struct {
	ID   string `path:"id" format:"uuid" doc:"The webhook's id." example:"7d3c2b1a-0f9e-4d8c-b7a6-5e4f3d2c1b0a"`
	Body *RotateWebhookRequest
}

type webhookOutput struct{ Body Webhook }
type webhookSecretOutput struct {
	Location string `header:"Location" doc:"The webhook's URL." example:"/api/agents/webhooks/7d3c2b1a-0f9e-4d8c-b7a6-5e4f3d2c1b0a"`
	Body     WebhookWithSecret
}
type webhookListOutput struct{ Body WebhookList }

// addWebhookRoutes registers the caller's webhooks: create, list, read,
// change, delete and rotate the secret.
func (s *Server) addWebhookRoutes(api huma.API) {
	create := humanOp("create-webhook", http.MethodPost, "/api/agents/webhooks", "Create a webhook",
		"Posts the events of your sessions to url, signed in the Standard Webhooks format with a secret shown in this answer only.",
		"Webhooks", commandErrors)
	create.DefaultStatus = http.StatusCreated
	register(api, create, s.createWebhook)
	register(api, humanOp("list-webhooks", http.MethodGet, "/api/agents/webhooks", "List your webhooks",
		"Your webhooks, oldest first, without their secrets.", "Webhooks", listErrors), s.listWebhooks)
	register(api, humanOp("get-webhook", http.MethodGet, "/api/agents/webhooks/{id}", "Get a webhook",
		"One of your webhooks, without its secret; disabledReason says why the worker disabled it.", "Webhooks", queryErrors), s.getWebhook)
	register(api, humanOp("update-webhook", http.MethodPatch, "/api/agents/webhooks/{id}", "Update a webhook",
		"Changes the fields given; enabling a disabled webhook sends its pending deliveries.", "Webhooks", commandErrors), s.updateWebhook)
	del := humanOp("delete-webhook", http.MethodDelete, "/api/agents/webhooks/{id}", "Delete a webhook",
		"Deletes the webhook and its delivery log; nothing more is sent to it.", "Webhooks", commandErrors)
	del.DefaultStatus = http.StatusNoContent
	register(api, del, s.deleteWebhook)
	register(api, humanOp("rotate-webhook-secret", http.MethodPost, "/api/agents/webhooks/{id}/rotate", "Rotate a webhook's secret",
		"Makes a new signing secret, shown in this answer only; the replaced one still signs each delivery, beside the new one, "+
			"for graceSeconds.", "Webhooks", commandErrors), s.rotateWebhook)
}

// webhookWriter is the caller and the database of a webhook command.
func (s *Server) webhookWriter(ctx context.Context) (uuid.UUID, error) {
	owner, err := s.reader(ctx)
	if err != nil {
		return uuid.Nil, err
	}
	if s.deps.WebhookDB == nil {
		return uuid.Nil, unavailable("webhooks")
	}
	return owner, nil
}

// writeWebhook is the caller and the webhook of a command on it, with the
// database that command needs.
func (s *Server) writeWebhook(ctx context.Context, rawID string) (owner, id uuid.UUID, err error) {
	if owner, err = s.webhookWriter(ctx); err != nil {
		return
	}
	id, err = parseID("path.id", rawID)
	return
}

// checkWebhookURL refuses a destination the deliveries may not go to.
func (s *Server) checkWebhookURL(raw string) error {
	p := netguard.Policy{AllowPrivate: s.cfg.WebhookAllowPrivate, RequireHTTPS: !s.cfg.WebhookAllowPrivate, Switch: webhooks.AllowPrivateEnv}
	if reason := netguard.CheckURL(raw, p); reason != "" {
		return NewKindError(KindValidation, reason).WithField("body.url")
	}
	return nil
}

func checkEventTypes(types []string) error {
	if err := domain.ValidateWebhookEventTypes(types); err != nil {
		return NewKindError(KindValidation, err.Error()).WithField("body.eventTypes")
	}
	return nil
}

// checkOwned refuses a filter naming a session or template that is not
// the caller's.
func (s *Server) checkOwned(ctx context.Context, owner uuid.UUID, entity, field string, id *uuid.UUID) error {
	if id == nil {
		return nil
	}
	ok, err := s.deps.Queries.Owns(ctx, owner, entity, *id)
	if err != nil {
		return err
	}
	if !ok {
		return NewKindError(KindValidation, "you have no "+entity+" "+id.String()).WithField(field)
	}
	return nil
}

func (s *Server) createWebhook(ctx context.Context, in *createWebhookInput) (*webhookSecretOutput, error) {
	owner, err := s.webhookWriter(ctx)
	if err != nil {
		return nil, err
	}
	b := in.Body
	if err := s.checkWebhookURL(b.URL); err != nil {
		return nil, err
	}
	if err := checkEventTypes(b.EventTypes); err != nil {
		return nil, err
	}
	if err := s.checkOwned(ctx, owner, "session", "body.sessionId", b.SessionID); err != nil {
		return nil, err
	}
	if err := s.checkOwned(ctx, owner, "template", "body.templateId", b.TemplateID); err != nil {
		return nil, err
	}
	secret, err := newWebhookSecret()
	if err != nil {
		return nil, err
	}
	id := uuid.New()
	if err := postgres.CreateWebhook(ctx, s.deps.WebhookDB, postgres.NewWebhook{ID: id, Owner: owner, URL: b.URL,
		Description: b.Description, EventTypes: b.EventTypes, SessionID: b.SessionID, TemplateID: b.TemplateID,
		Enabled: b.Enabled == nil || *b.Enabled, Secret: secret, Now: time.Now()}); err != nil {
		return nil, err
	}
	w, err := s.deps.Queries.Webhook(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return &webhookSecretOutput{Location: "/api/agents/webhooks/" + id.String(),
		Body: WebhookWithSecret{Webhook: webhookOf(w), Secret: secret}}, nil
}

func newWebhookSecret() (string, error) {
	key := make([]byte, domain.WebhookSecretBytes)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	return domain.NewWebhookSecret(key), nil
}

func (s *Server) listWebhooks(ctx context.Context, _ *struct{}) (*webhookListOutput, error) {
	owner, err := s.reader(ctx)
	if err != nil {
		return nil, err
	}
	ws, err := s.deps.Queries.Webhooks(ctx, owner)
	if err != nil {
		return nil, err
	}
	out := WebhookList{Webhooks: make([]Webhook, len(ws))}
	for i, w := range ws {
		out.Webhooks[i] = webhookOf(w)
	}
	return &webhookListOutput{Body: out}, nil
}

func (s *Server) getWebhook(ctx context.Context, in *webhookIDInput) (*webhookOutput, error) {
	owner, id, err := s.readOwned(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	w, err := s.deps.Queries.Webhook(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return &webhookOutput{Body: webhookOf(w)}, nil
}

func (s *Server) updateWebhook(ctx context.Context, in *updateWebhookInput) (*webhookOutput, error) {
	owner, id, err := s.writeWebhook(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	b := in.Body
	c := postgres.WebhookChanges{URL: b.URL, Description: b.Description, Enabled: b.Enabled}
	if b.URL != nil {
		if err := s.checkWebhookURL(*b.URL); err != nil {
			return nil, err
		}
	}
	if b.EventTypes != nil {
		if err := checkEventTypes(b.EventTypes); err != nil {
			return nil, err
		}
		c.EventTypes = &b.EventTypes
	}
	found, err := postgres.UpdateWebhook(ctx, s.deps.WebhookDB, owner, id, c, time.Now())
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, webhookNotFound(id)
	}
	return s.getWebhook(ctx, &webhookIDInput{ID: in.ID})
}

func (s *Server) deleteWebhook(ctx context.Context, in *webhookIDInput) (*struct{}, error) {
	owner, id, err := s.writeWebhook(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	found, err := postgres.DeleteWebhook(ctx, s.deps.WebhookDB, owner, id)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, webhookNotFound(id)
	}
	return nil, nil
}

func (s *Server) rotateWebhook(ctx context.Context, in *rotateWebhookInput) (*webhookSecretOutput, error) {
	owner, id, err := s.writeWebhook(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	grace := domain.DefaultWebhookRotationGrace
	if in.Body != nil && in.Body.GraceSeconds != nil {
		grace = time.Duration(*in.Body.GraceSeconds) * time.Second
	}
	secret, err := newWebhookSecret()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	found, err := postgres.RotateWebhookSecret(ctx, s.deps.WebhookDB, owner, id, secret, now.Add(grace), now)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, webhookNotFound(id)
	}
	w, err := s.deps.Queries.Webhook(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return &webhookSecretOutput{Location: "/api/agents/webhooks/" + id.String(),
		Body: WebhookWithSecret{Webhook: webhookOf(w), Secret: secret}}, nil
}

func webhookNotFound(id uuid.UUID) error {
	return NewKindError(KindNotFound, "webhook "+id.String()+" not found")
}
