package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// ToolApproval says which tool uses of a session wait for its owner's
// decision, for how long, and what an unanswered one becomes.
type ToolApproval struct {
	// Mode is None, All or List.
	Mode           string   `json:"mode"`
	Tools          []string `json:"tools,omitempty"`
	TimeoutSeconds int      `json:"timeoutSeconds,omitempty"`
	OnTimeout      string   `json:"onTimeout,omitempty"`
}

// Schedule is when a template starts sessions by itself.
type Schedule struct {
	CronExpression string `json:"cronExpression"`
	TimeZone       string `json:"timeZone"`
	IsEnabled      bool   `json:"isEnabled"`
}

// Template is a template as its detail shows it (the fields people's
// tools show).
type Template struct {
	ID                   string        `json:"id"`
	Name                 string        `json:"name"`
	Description          string        `json:"description"`
	ModelID              string        `json:"modelId"`
	SystemPrompt         string        `json:"systemPrompt"`
	AllowedTools         []string      `json:"allowedTools"`
	DefaultSkillIDs      []string      `json:"defaultSkillIds"`
	DefaultBudgetCapUsd  float64       `json:"defaultBudgetCapUsd"`
	WarnAtPercent        int           `json:"warnAtPercent"`
	PlanApprovalRequired bool          `json:"planApprovalRequired"`
	ToolApproval         *ToolApproval `json:"toolApproval"`
	Schedule             *Schedule     `json:"schedule"`
	NextRunAt            *time.Time    `json:"nextRunAt"`
	// Scheduled is whether the template has a schedule: the list shows
	// this instead of the schedule.
	Scheduled bool      `json:"scheduled"`
	IsActive  bool      `json:"isActive"`
	Version   int       `json:"version"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// TemplateList is one page of templates.
type TemplateList struct {
	Items []Template `json:"items"`
	Total int        `json:"total"`
}

// TemplateChange is a new template, or the fields of one that change:
// a nil field keeps the template's value on an update.
type TemplateChange struct {
	Name                 *string       `json:"name,omitempty"`
	Description          *string       `json:"description,omitempty"`
	ModelID              *string       `json:"modelId,omitempty"`
	SystemPrompt         *string       `json:"systemPrompt,omitempty"`
	AllowedTools         *[]string     `json:"allowedTools,omitempty"`
	DefaultSkillIDs      []string      `json:"defaultSkillIds,omitempty"`
	DefaultBudgetCapUsd  *float64      `json:"defaultBudgetCapUsd,omitempty"`
	WarnAtPercent        *int          `json:"warnAtPercent,omitempty"`
	PlanApprovalRequired *bool         `json:"planApprovalRequired,omitempty"`
	ToolApproval         *ToolApproval `json:"toolApproval,omitempty"`
	Schedule             *Schedule     `json:"schedule,omitempty"`
	RemoveSchedule       bool          `json:"removeSchedule,omitempty"`
}

// Skill is a skill as its detail shows it.
type Skill struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	Description  string    `json:"description"`
	Instructions string    `json:"instructions"`
	IsActive     bool      `json:"isActive"`
	Version      int       `json:"version"`
	UpdatedAt    time.Time `json:"updatedAt"`
}

// SkillList is one page of skills.
type SkillList struct {
	Items []Skill `json:"items"`
	Total int     `json:"total"`
}

// SkillChange is a new skill, or the fields of one that change.
type SkillChange struct {
	Name         *string `json:"name,omitempty"`
	Description  *string `json:"description,omitempty"`
	Instructions *string `json:"instructions,omitempty"`
}

// Catalog names the two kinds of configuration people keep: "templates"
// and "skills".
type Catalog string

// The catalogs of the API.
const (
	Templates Catalog = "templates"
	Skills    Catalog = "skills"
)

func (k Catalog) path(parts ...string) string {
	p := "/api/agents/" + string(k)
	for _, part := range parts {
		p += "/" + url.PathEscape(part)
	}
	return p
}

// List lists the caller's entries of the catalog: all of them, or only
// the active (active = "true") or deactivated ("false") ones.
func List[T any](ctx context.Context, c *Client, k Catalog, active string) (Answer[T], error) {
	path := k.path() + "?pageSize=100"
	if active != "" {
		path += "&isActive=" + url.QueryEscape(active)
	}
	return call[T](ctx, c, http.MethodGet, path, nil)
}

// Get reads one entry of the catalog.
func Get[T any](ctx context.Context, c *Client, k Catalog, id string) (Answer[T], error) {
	return call[T](ctx, c, http.MethodGet, k.path(id), nil)
}

// Create adds an entry to the catalog.
func Create[T any](ctx context.Context, c *Client, k Catalog, body any) (Answer[T], error) {
	return call[T](ctx, c, http.MethodPost, k.path(), body)
}

// Update changes the fields of an entry that body sets.
func Update[T any](ctx context.Context, c *Client, k Catalog, id string, body any) (Answer[T], error) {
	return call[T](ctx, c, http.MethodPut, k.path(id), body)
}

// SetActive activates or deactivates an entry of the catalog.
func SetActive[T any](ctx context.Context, c *Client, k Catalog, id string, active bool) (Answer[T], error) {
	verb := "deactivate"
	if active {
		verb = "activate"
	}
	return call[T](ctx, c, http.MethodPost, k.path(id, verb), nil)
}
