package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// SessionSummary is a session as the session list shows it.
type SessionSummary struct {
	ID                        string    `json:"id"`
	Name                      string    `json:"name"`
	Status                    string    `json:"status"`
	HasPendingReview          bool      `json:"hasPendingReview"`
	TotalCostUsd              float64   `json:"totalCostUsd"`
	ContextWindowUsagePercent float64   `json:"contextWindowUsagePercent"`
	TurnCount                 int       `json:"turnCount"`
	CreatedAt                 time.Time `json:"createdAt"`
}

// SessionList is one page of sessions.
type SessionList struct {
	Items    []SessionSummary `json:"items"`
	Total    int              `json:"total"`
	Page     int              `json:"page"`
	PageSize int              `json:"pageSize"`
}

// Session is one session in full (the fields people's tools show).
type Session struct {
	ID               string    `json:"id"`
	Name             string    `json:"name"`
	Status           string    `json:"status"`
	HasPendingReview bool      `json:"hasPendingReview"`
	WorkingDirectory string    `json:"workingDirectory"`
	Objective        string    `json:"objective"`
	ModelID          string    `json:"modelId"`
	ChainID          string    `json:"chainId"`
	TraceID          string    `json:"traceId"`
	TraceURL         string    `json:"traceUrl"`
	Runner           string    `json:"runner"`
	WaitingForRunner bool      `json:"waitingForRunner"`
	RetryCount       int       `json:"retryCount"`
	CreatedAt        time.Time `json:"createdAt"`
	Budget           struct {
		HardCapUsd       float64 `json:"hardCapUsd"`
		EstimatedCostUsd float64 `json:"estimatedCostUsd"`
		PercentUsed      float64 `json:"percentUsed"`
	} `json:"budget"`
	Metrics struct {
		TotalCostUsd              float64 `json:"totalCostUsd"`
		TotalTokens               int64   `json:"totalTokens"`
		ContextWindowUsagePercent float64 `json:"contextWindowUsagePercent"`
		TurnCount                 int     `json:"turnCount"`
	} `json:"metrics"`
	PendingQuestion *struct {
		Content   string    `json:"content"`
		Options   []string  `json:"options"`
		ExpiresAt time.Time `json:"expiresAt"`
	} `json:"pendingQuestion"`
	PendingPermission *struct {
		RequestID string    `json:"requestId"`
		ToolName  string    `json:"toolName"`
		Input     string    `json:"input"`
		ExpiresAt time.Time `json:"expiresAt"`
	} `json:"pendingPermission"`
	ToolApproval *ToolApproval `json:"toolApproval"`
	WaitingFor   *WaitingFor   `json:"waitingFor"`
	Plan         *struct {
		Status  string `json:"status"`
		Content string `json:"content"`
	} `json:"plan"`
	Output *struct {
		FilesChanged    int    `json:"filesChanged"`
		TestsAdded      int    `json:"testsAdded"`
		AllTestsPassing bool   `json:"allTestsPassing"`
		CommitSha       string `json:"commitSha"`
	} `json:"output"`
	Failure *struct {
		Reason  string `json:"reason"`
		Message string `json:"message"`
	} `json:"failure"`
}

// WaitingFor is what a session waits for, since when, and until when.
type WaitingFor struct {
	Kind     string     `json:"kind"`
	Detail   string     `json:"detail"`
	ToolName string     `json:"toolName"`
	Since    *time.Time `json:"since"`
	Deadline *time.Time `json:"deadline"`
}

// StartSession is what a new session is started with.
type StartSession struct {
	Objective        string   `json:"objective"`
	Name             string   `json:"name,omitempty"`
	WorkingDirectory string   `json:"workingDirectory,omitempty"`
	TemplateID       string   `json:"templateId,omitempty"`
	ModelID          string   `json:"modelId,omitempty"`
	BudgetCapUsd     *float64 `json:"budgetCapUsd,omitempty"`
	SkillIDs         []string `json:"skillIds,omitempty"`
	// ToolApproval overrides the template's: which tool uses wait for
	// the owner's decision.
	ToolApproval *ToolApproval `json:"toolApproval,omitempty"`
}

// Started is the answer to a start: the new session.
type Started struct {
	Session Session `json:"session"`
}

// QueuedMessage is a message to a session's agent.
type QueuedMessage struct {
	MessageID string    `json:"messageId"`
	Content   string    `json:"content"`
	Priority  string    `json:"priority"`
	Status    string    `json:"status"`
	Source    string    `json:"source"`
	Sequence  int64     `json:"sequence"`
	CreatedAt time.Time `json:"createdAt"`
}

// MessageQueue is a session's message queue; MessageID names the message
// an enqueue added.
type MessageQueue struct {
	SessionID string          `json:"sessionId"`
	MessageID string          `json:"messageId"`
	Messages  []QueuedMessage `json:"messages"`
}

// Pool is how full the caller's session pool is.
type Pool struct {
	ActiveCount    int     `json:"activeCount"`
	MaxCount       int     `json:"maxCount"`
	AvailableSlots int     `json:"availableSlots"`
	Percentage     float64 `json:"percentage"`
}

// Message priorities: an Immediate message steers the running turn, a
// Queued one waits for the next.
const (
	Immediate = "Immediate"
	Queued    = "Queued"
)

func sessionPath(id string, parts ...string) string {
	p := "/api/agents/sessions/" + url.PathEscape(id)
	for _, part := range parts {
		p += "/" + part
	}
	return p
}

// Sessions lists the caller's sessions, in status when it is not empty.
func (c *Client) Sessions(ctx context.Context, status string, page, pageSize int) (Answer[SessionList], error) {
	q := url.Values{}
	if status != "" {
		q.Set("status", status)
	}
	if page > 0 {
		q.Set("page", strconv.Itoa(page))
	}
	if pageSize > 0 {
		q.Set("pageSize", strconv.Itoa(pageSize))
	}
	path := "/api/agents/sessions"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return call[SessionList](ctx, c, http.MethodGet, path, nil)
}

// Session reads one session.
func (c *Client) Session(ctx context.Context, id string) (Answer[Session], error) {
	return call[Session](ctx, c, http.MethodGet, sessionPath(id), nil)
}

// Start starts a session.
func (c *Client) Start(ctx context.Context, s StartSession) (Answer[Started], error) {
	return call[Started](ctx, c, http.MethodPost, "/api/agents/sessions", s)
}

// Enqueue sends the session's agent a message of priority (Immediate or Queued).
func (c *Client) Enqueue(ctx context.Context, id, content, priority string) (Answer[MessageQueue], error) {
	return call[MessageQueue](ctx, c, http.MethodPost, sessionPath(id, "messages", "queue"),
		map[string]string{"content": content, "priority": priority})
}

// Queue reads the session's message queue.
func (c *Client) Queue(ctx context.Context, id string) (Answer[MessageQueue], error) {
	return call[MessageQueue](ctx, c, http.MethodGet, sessionPath(id, "messages", "queue"), nil)
}

// Promote makes a pending Queued message Immediate.
func (c *Client) Promote(ctx context.Context, id, messageID string) (Answer[MessageQueue], error) {
	return call[MessageQueue](ctx, c, http.MethodPatch, sessionPath(id, "messages", "queue", url.PathEscape(messageID), "promote"), nil)
}

// CancelMessage withdraws a pending message.
func (c *Client) CancelMessage(ctx context.Context, id, messageID string) (Answer[MessageQueue], error) {
	return call[MessageQueue](ctx, c, http.MethodDelete, sessionPath(id, "messages", "queue", url.PathEscape(messageID)), nil)
}

// Control sends one of the session's commands that take no input: pause,
// resume, interrupt, cancel, approve, close.
func (c *Client) Control(ctx context.Context, id, verb string) (Answer[Session], error) {
	return call[Session](ctx, c, http.MethodPost, sessionPath(id, verb), nil)
}

// Answer answers the session's pending question.
func (c *Client) Answer(ctx context.Context, id, answer string) (Answer[Session], error) {
	return call[Session](ctx, c, http.MethodPost, sessionPath(id, "answer"), map[string]string{"answer": answer})
}

// Reject rejects the session's output, for reason when it is not empty.
func (c *Client) Reject(ctx context.Context, id, reason string) (Answer[Session], error) {
	body := map[string]string{}
	if reason != "" {
		body["reason"] = reason
	}
	return call[Session](ctx, c, http.MethodPost, sessionPath(id, "reject"), body)
}

// Retry runs a failed session again, with an additional instruction when
// it is not empty.
func (c *Client) Retry(ctx context.Context, id, instruction string) (Answer[Session], error) {
	body := map[string]string{}
	if instruction != "" {
		body["additionalInstruction"] = instruction
	}
	return call[Session](ctx, c, http.MethodPost, sessionPath(id, "retry"), body)
}

// Decide allows or denies the tool use the session's permission request
// asks for, with a message for the agent when it is not empty.
func (c *Client) Decide(ctx context.Context, id, requestID string, allow bool, message string) (Answer[Session], error) {
	verb := "deny"
	if allow {
		verb = "allow"
	}
	body := map[string]string{}
	if message != "" {
		body["message"] = message
	}
	return call[Session](ctx, c, http.MethodPost, sessionPath(id, "permissions", url.PathEscape(requestID), verb), body)
}

// ApprovePlan lets the agent carry out the plan awaiting approval.
func (c *Client) ApprovePlan(ctx context.Context, id string) (Answer[Session], error) {
	return call[Session](ctx, c, http.MethodPost, sessionPath(id, "plan", "approve"), nil)
}

// RejectPlan sends the plan back to the agent with feedback.
func (c *Client) RejectPlan(ctx context.Context, id, feedback string) (Answer[Session], error) {
	return call[Session](ctx, c, http.MethodPost, sessionPath(id, "plan", "reject"), map[string]string{"feedback": feedback})
}

// Pool reads the caller's session pool.
func (c *Client) Pool(ctx context.Context) (Answer[Pool], error) {
	return call[Pool](ctx, c, http.MethodGet, "/api/agents/pool", nil)
}

// SetPoolSize sets how many of the caller's sessions may run at once.
func (c *Client) SetPoolSize(ctx context.Context, max int) (Answer[Pool], error) {
	return call[Pool](ctx, c, http.MethodPut, "/api/agents/pool", map[string]int{"maxConcurrentSessions": max})
}

// Checkpoint is the state of a session at the end of one of its turns.
type Checkpoint struct {
	Turn         int       `json:"turn"`
	RecordedAt   time.Time `json:"recordedAt"`
	FilesChanged int       `json:"filesChanged"`
	LastMessage  string    `json:"lastMessage"`
	Snapshot     string    `json:"snapshot"`
	Rewound      bool      `json:"rewound"`
	Pruned       bool      `json:"pruned"`
	Bytes        int64     `json:"bytes"`
	AddedBytes   int64     `json:"addedBytes"`
}

// CheckpointList is a session's checkpoints, oldest first.
type CheckpointList struct {
	SessionID  string       `json:"sessionId"`
	Items      []Checkpoint `json:"items"`
	Kept       int          `json:"kept"`
	StoreBytes int64        `json:"storeBytes"`
}

// FileDiff is how one file differs between two checkpoints.
type FileDiff struct {
	Path     string `json:"path"`
	Status   string `json:"status"`
	OldBytes int64  `json:"oldBytes"`
	NewBytes int64  `json:"newBytes"`
	Binary   bool   `json:"binary"`
	Patch    string `json:"patch"`
	Omitted  string `json:"omitted"`
}

// CheckpointDiff is what changed between two checkpoints.
type CheckpointDiff struct {
	From  int        `json:"from"`
	To    int        `json:"to"`
	Files []FileDiff `json:"files"`
}

// CheckpointDiff compares the session's checkpoints of turns from and to.
func (c *Client) CheckpointDiff(ctx context.Context, id string, from, to int) (Answer[CheckpointDiff], error) {
	q := url.Values{"from": {strconv.Itoa(from)}, "to": {strconv.Itoa(to)}}
	return call[CheckpointDiff](ctx, c, http.MethodGet, sessionPath(id, "checkpoints", "diff")+"?"+q.Encode(), nil)
}

// Checkpoints lists the session's checkpoints.
func (c *Client) Checkpoints(ctx context.Context, id string) (Answer[CheckpointList], error) {
	return call[CheckpointList](ctx, c, http.MethodGet, sessionPath(id, "checkpoints"), nil)
}

// Fork starts a new session from the session's checkpoint of turn, with
// an objective of its own when it is not empty.
func (c *Client) Fork(ctx context.Context, id string, turn int, objective string) (Answer[Started], error) {
	body := map[string]any{"checkpoint": turn}
	if objective != "" {
		body["objective"] = objective
	}
	return call[Started](ctx, c, http.MethodPost, sessionPath(id, "fork"), body)
}

// Rewind takes the session back to its checkpoint of turn.
func (c *Client) Rewind(ctx context.Context, id string, turn int) (Answer[Session], error) {
	return call[Session](ctx, c, http.MethodPost, sessionPath(id, "rewind"), map[string]any{"checkpoint": turn})
}
