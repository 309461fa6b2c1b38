package api

import (
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/domain"
)

// The response shapes of sessions. Amounts of money are JSON numbers of US
// dollars; durations are seconds.

// sessionStatusEnum lists domain.AllSessionStatuses, for Huma's enum tags
// (a test keeps the two equal).
const sessionStatusEnum = "Queued,Running,Interrupting,Interrupted,Pausing,Paused,Resuming,Cancelling,Cancelled,WaitingForInput,WaitingForApproval,Idle,ContextExhausted,Completed,Failed"

// SessionDetail is the full state of one session (AgentSessionDto).
type SessionDetail struct {
	ID                uuid.UUID          `json:"id" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	OwnerID           uuid.UUID          `json:"ownerId" format:"uuid" doc:"The owner: the user the session works for." example:"6a1f0c7e-2b3d-4e5f-8a9b-0c1d2e3f4a5b"`
	Name              string             `json:"name" doc:"The session's name; by default the objective's first line." example:"Add retries to the HTTP client"`
	Status            string             `json:"status" enum:"Queued,Running,Interrupting,Interrupted,Pausing,Paused,Resuming,Cancelling,Cancelled,WaitingForInput,WaitingForApproval,Idle,ContextExhausted,Completed,Failed" doc:"Where the session is in its lifecycle." example:"Running"`
	HasPendingReview  bool               `json:"hasPendingReview" doc:"Whether output waits for the owner's approval or rejection." example:"false"`
	WorkingDirectory  string             `json:"workingDirectory" doc:"The absolute path the agent works in." example:"/home/bruno/src/shop"`
	Objective         string             `json:"objective" doc:"What the session is asked to achieve." example:"Add retries with backoff to the HTTP client, with tests."`
	ModelID           string             `json:"modelId" doc:"The model the agent runs on." example:"claude-sonnet-4-5"`
	Engine            string             `json:"engine,omitempty" enum:"script,claude" doc:"The sidecar engine the agent runs on, fixed when its first sidecar started: a runtime of another engine leaves the session waiting rather than switch it." example:"claude"`
	TemplateID        *uuid.UUID         `json:"templateId,omitempty" format:"uuid" doc:"The template the session was configured from, if any." example:"3c9d2e1f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"`
	ChainID           *uuid.UUID         `json:"chainId,omitempty" format:"uuid" doc:"The chain the session belongs to, if any." example:"7d8e9f0a-1b2c-4d3e-8f4a-5b6c7d8e9f0a"`
	ForkedFrom        *ForkedFrom        `json:"forkedFrom,omitempty" doc:"The checkpoint the session was forked from, for a fork."`
	EnabledSkillIDs   []uuid.UUID        `json:"enabledSkillIds" nullable:"false" format:"uuid" doc:"The skills enabled on the session."`
	ExecutionMode     string             `json:"executionMode" enum:"Standalone,ParallelBatch,SequentialQueue" doc:"How the session was launched." example:"Standalone"`
	Budget            SessionBudget      `json:"budget" doc:"The spending cap and what was spent."`
	Metrics           SessionMetrics     `json:"metrics" doc:"Cost, tokens, context window and turns."`
	AutoContinue      *AutoContinue      `json:"autoContinue,omitempty" doc:"The validate-and-continue loop, if configured."`
	TaskList          *TaskList          `json:"taskList,omitempty" doc:"The agent's latest task list, if it wrote one."`
	Plan              *Plan              `json:"plan,omitempty" doc:"The agent's plan, if it entered plan mode."`
	Output            *Output            `json:"output,omitempty" doc:"The output of the last turn that delivered work, if any."`
	Failure           *Failure           `json:"failure,omitempty" doc:"Why the session failed, when it did."`
	RetryCount        int                `json:"retryCount" doc:"How many times the session was retried." example:"0"`
	RetryInstruction  string             `json:"retryInstruction,omitempty" doc:"The extra instruction of the last retry." example:"Run the linter before finishing."`
	ToolApproval      ToolApproval       `json:"toolApproval" doc:"Which tool uses wait for the owner's approval."`
	PendingQuestion   *Question          `json:"pendingQuestion,omitempty" doc:"The question the session waits on (WaitingForInput)."`
	PendingPermission *PermissionRequest `json:"pendingPermission,omitempty" doc:"The tool use waiting for approval (WaitingForApproval)."`
	TraceID           string             `json:"traceId,omitempty" doc:"The W3C trace id of the request that started the session (its traceparent, or the span agentbus started when it exports traces); absent when it came without one." example:"4bf92f3577b34da6a3ce929d0e0e4736"`
	TraceURL          string             `json:"traceUrl,omitempty" doc:"The trace in your tracing UI, when the server is configured with one (AGENTBUS_TRACE_URL)." example:"http://localhost:16686/trace/4bf92f3577b34da6a3ce929d0e0e4736"`
	WaitingFor        *WaitingFor        `json:"waitingFor,omitempty" doc:"What the session waits for and since when: a pool slot, the model, a tool call, a safe point, your decision, answer, review or message. None once it ended."`
	Runner            string             `json:"runner,omitempty" doc:"The runner whose host runs the session's sidecar, while one is assigned." example:"host-a"`
	WaitingForRunner  bool               `json:"waitingForRunner" doc:"Whether the session holds a pool slot but waits for a runner with room for its sidecar; it starts as soon as one frees." example:"false"`
	ReloadPending     bool               `json:"reloadPending" doc:"Whether a configuration reload waits for the sidecar's acknowledgement." example:"false"`
	PausedAt          *time.Time         `json:"pausedAt,omitempty" doc:"When the session was paused, while it is." example:"2026-03-01T09:30:00Z"`
	StartedAt         *time.Time         `json:"startedAt,omitempty" doc:"When the session started running." example:"2026-03-01T09:00:05Z"`
	CompletedAt       *time.Time         `json:"completedAt,omitempty" doc:"When the session ended." example:"2026-03-01T10:12:00Z"`
	CreatedAt         time.Time          `json:"createdAt" doc:"When the session was created." example:"2026-03-01T09:00:00Z"`
	UpdatedAt         time.Time          `json:"updatedAt" doc:"When the session last changed." example:"2026-03-01T09:45:00Z"`
	Version           int64              `json:"version" doc:"The session's version; it grows with every change." example:"7"`
}

// SessionBudget is a session's spending cap and spend.
type SessionBudget struct {
	HardCapUsd       float64 `json:"hardCapUsd" doc:"The most the session may spend, in US dollars." example:"10"`
	WarnAtPercent    int     `json:"warnAtPercent" doc:"The share of the cap at which the owner is warned." example:"80"`
	TokensUsed       int64   `json:"tokensUsed" doc:"Tokens spent so far." example:"120000"`
	EstimatedCostUsd float64 `json:"estimatedCostUsd" doc:"What the session spent so far, in US dollars." example:"2.35"`
	PercentUsed      float64 `json:"percentUsed" doc:"The spend as a percentage of the cap." example:"23.5"`
	RemainingUsd     float64 `json:"remainingUsd" doc:"What may still be spent, in US dollars." example:"7.65"`
}

// SessionMetrics are a session's running totals (SessionMetricsDto).
type SessionMetrics struct {
	TotalCostUsd              float64                    `json:"totalCostUsd" doc:"Cost of every turn and subagent, in US dollars." example:"2.35"`
	TotalTokens               int64                      `json:"totalTokens" doc:"Tokens of every model, subagents included." example:"120000"`
	TokenUsageByModel         map[string]TokenUsage      `json:"tokenUsageByModel" doc:"Tokens per model id, subagents included."`
	ContextWindow             *ContextWindow             `json:"contextWindow,omitempty" doc:"The session's latest context window, once reported."`
	ContextWindowUsagePercent float64                    `json:"contextWindowUsagePercent" doc:"How full the context window is, in percent." example:"41.2"`
	SubAgentMetrics           map[string]SubAgentMetrics `json:"subAgentMetrics" doc:"Each subagent's own numbers, by subagent id."`
	TurnCount                 int                        `json:"turnCount" doc:"Turns that ended." example:"3"`
	LastTurnAt                *time.Time                 `json:"lastTurnAt,omitempty" doc:"When the last turn ended." example:"2026-03-01T09:40:00Z"`
}

// TokenUsage counts tokens.
type TokenUsage struct {
	InputTokens      int64 `json:"inputTokens" doc:"Input tokens." example:"90000"`
	OutputTokens     int64 `json:"outputTokens" doc:"Output tokens." example:"12000"`
	CacheReadTokens  int64 `json:"cacheReadTokens" doc:"Tokens read from the prompt cache." example:"15000"`
	CacheWriteTokens int64 `json:"cacheWriteTokens" doc:"Tokens written to the prompt cache." example:"3000"`
}

// ContextWindow is the size of a context window.
type ContextWindow struct {
	InputTokens       int64     `json:"inputTokens" doc:"Input tokens in the window." example:"70000"`
	OutputTokens      int64     `json:"outputTokens" doc:"Output tokens in the window." example:"8000"`
	CacheReadTokens   int64     `json:"cacheReadTokens" doc:"Cached tokens read into the window." example:"4000"`
	CacheWriteTokens  int64     `json:"cacheWriteTokens" doc:"Tokens written to the cache." example:"400"`
	ModelContextLimit int64     `json:"modelContextLimit" doc:"The model's context size." example:"200000"`
	UsagePercent      float64   `json:"usagePercent" doc:"How full the window is, in percent." example:"41.2"`
	RecordedAt        time.Time `json:"recordedAt" doc:"When the engine reported it." example:"2026-03-01T09:40:00Z"`
}

// SubAgentMetrics are one subagent's own numbers.
type SubAgentMetrics struct {
	TotalCostUsd      float64               `json:"totalCostUsd" doc:"The subagent's cost, in US dollars (also in the session's total)." example:"0.4"`
	TokenUsageByModel map[string]TokenUsage `json:"tokenUsageByModel" doc:"The subagent's tokens per model id."`
	ContextWindow     *ContextWindow        `json:"contextWindow,omitempty" doc:"The subagent's own context window."`
}

// AutoContinue is the validate-and-continue loop of a session.
type AutoContinue struct {
	ValidationCriteria       []ValidationCriterion `json:"validationCriteria" nullable:"false" doc:"The checks run after each turn."`
	MaxContinuations         int                   `json:"maxContinuations" doc:"How many times the session continues on its own." example:"5"`
	CurrentContinuationCount int                   `json:"currentContinuationCount" doc:"How many times it continued so far." example:"1"`
	IsEnabled                bool                  `json:"isEnabled" doc:"Whether the loop is on." example:"true"`
}

// ValidationCriterion is one check of the auto-continue loop.
type ValidationCriterion struct {
	Type          string   `json:"type" enum:"TestsPassing,CoverageThreshold,CustomCommand,LintPassing" doc:"What is checked." example:"TestsPassing"`
	Threshold     *float64 `json:"threshold,omitempty" minimum:"0" maximum:"100" doc:"For CoverageThreshold: the minimum coverage, in percent." example:"80"`
	CustomCommand string   `json:"customCommand,omitempty" maxLength:"2000" doc:"For CustomCommand: the command that must succeed." example:"make check"`
}

// TaskList is the agent's task list (SessionTaskListDto).
type TaskList struct {
	Tasks          []Task    `json:"tasks" nullable:"false" doc:"The tasks, in the agent's order."`
	CompletedCount int       `json:"completedCount" doc:"How many tasks are Completed." example:"2"`
	LastUpdatedAt  time.Time `json:"lastUpdatedAt" doc:"When the agent last wrote the list." example:"2026-03-01T09:20:00Z"`
}

// Task is one entry of the agent's task list.
type Task struct {
	ID         string    `json:"id" doc:"The agent's id of the task." example:"3"`
	Subject    string    `json:"subject" doc:"What the task is." example:"Write the retry tests"`
	Status     string    `json:"status" enum:"Pending,InProgress,Completed" doc:"The task's state." example:"InProgress"`
	ActiveForm string    `json:"activeForm,omitempty" doc:"The task as an ongoing action." example:"Writing the retry tests"`
	UpdatedAt  time.Time `json:"updatedAt" doc:"When the task last changed." example:"2026-03-01T09:20:00Z"`
}

// Plan is the agent's plan document (SessionPlanDto).
type Plan struct {
	Content          string     `json:"content" doc:"The plan, as the agent wrote it (Markdown)." example:"1. Add a retry policy\n2. Test it"`
	Status           string     `json:"status" enum:"Draft,PendingApproval,Approved,Rejected" doc:"The plan's state." example:"PendingApproval"`
	RequiresApproval bool       `json:"requiresApproval" doc:"Whether the plan waits for the owner's decision." example:"true"`
	Version          int        `json:"version" doc:"How many times the plan was submitted." example:"1"`
	Feedback         string     `json:"feedback,omitempty" doc:"The owner's reason for the last rejection." example:"Keep the public API unchanged."`
	CreatedAt        time.Time  `json:"createdAt" doc:"When the agent entered plan mode." example:"2026-03-01T09:05:00Z"`
	ApprovedAt       *time.Time `json:"approvedAt,omitempty" doc:"When the plan was approved." example:"2026-03-01T09:10:00Z"`
}

// Output is what a turn delivered for review.
type Output struct {
	OutputLineCount int    `json:"outputLineCount" minimum:"0" doc:"Lines of output the turn produced." example:"420"`
	FilesChanged    int    `json:"filesChanged" minimum:"0" doc:"Files changed." example:"4"`
	TestsAdded      int    `json:"testsAdded" minimum:"0" doc:"Tests added." example:"6"`
	AllTestsPassing bool   `json:"allTestsPassing" doc:"Whether every test passed at the end." example:"true"`
	CommitSha       string `json:"commitSha,omitempty" pattern:"^[0-9a-f]{40}$" doc:"The commit holding the work: a full 40-character git SHA." example:"9fceb02d0ae598e95dc970b74767f19372d61af8"`
}

// Failure is why a session failed.
type Failure struct {
	Reason  string `json:"reason" enum:"BudgetExhausted,VerificationFailed,AgentError,ManualCancellation,Timeout,InfrastructureError" doc:"The kind of failure." example:"AgentError"`
	Message string `json:"message,omitempty" doc:"What happened." example:"the agent process exited with code 1"`
}

// ToolApproval says which tool uses wait for the owner's approval.
type ToolApproval struct {
	Mode           string   `json:"mode" enum:"None,All,List" doc:"None: no tool waits; All: every tool use waits; List: the tools listed wait." example:"List"`
	Tools          []string `json:"tools,omitempty" doc:"With mode List: the tools that wait for approval." example:"[\"Bash\"]"`
	TimeoutSeconds int64    `json:"timeoutSeconds" doc:"How long a request waits for an answer." example:"120"`
	OnTimeout      string   `json:"onTimeout" enum:"Deny,Allow,Fail" doc:"What an unanswered request becomes." example:"Deny"`
}

// Question is a question the agent asked the owner.
type Question struct {
	Content   string    `json:"content" doc:"The question." example:"Should the retries also cover POST requests?"`
	Options   []string  `json:"options,omitempty" doc:"The answers the agent suggests, if any." example:"[\"Yes\",\"No\"]"`
	AskedAt   time.Time `json:"askedAt" doc:"When it was asked." example:"2026-03-01T09:15:00Z"`
	ExpiresAt time.Time `json:"expiresAt" doc:"When the question times out." example:"2026-03-02T09:15:00Z"`
}

// PermissionRequest is a tool use waiting for the owner's approval.
type PermissionRequest struct {
	RequestID string    `json:"requestId" doc:"The request's id; answer it with allow or deny." example:"toolu_01A2B3C4"`
	ToolName  string    `json:"toolName" doc:"The tool the agent wants to use." example:"Bash"`
	Input     string    `json:"input" doc:"The tool's input, as JSON." example:"{\"command\":\"rm -rf build\"}"`
	AskedAt   time.Time `json:"askedAt" doc:"When the agent asked." example:"2026-03-01T09:15:00Z"`
	ExpiresAt time.Time `json:"expiresAt" doc:"When the request times out." example:"2026-03-01T09:17:00Z"`
}

// The conversions from the domain's values.

func usd(u domain.USD) float64 { return u.Float64() }

// sessionDetail is the session as the API answers it: sessionDetailOf,
// with the link to its trace when the server has a tracing UI.
func (s *Server) sessionDetail(snap domain.AgentSessionSnapshot) SessionDetail {
	d := sessionDetailOf(snap)
	if d.TraceID != "" && s.cfg.TraceURL != "" {
		d.TraceURL = strings.ReplaceAll(s.cfg.TraceURL, TraceIDPlaceholder, d.TraceID)
	}
	return d
}

func sessionDetailOf(s domain.AgentSessionSnapshot) SessionDetail {
	d := SessionDetail{
		ID: s.ID, OwnerID: s.OwnerID, Name: s.Name, Status: string(s.Status), HasPendingReview: s.HasPendingReview,
		WorkingDirectory: s.WorkingDirectory, Objective: s.Objective, ModelID: s.ModelID, Engine: s.Engine,
		TemplateID: s.TemplateID, ChainID: s.ChainID, EnabledSkillIDs: s.EnabledSkillIDs,
		ExecutionMode: string(s.ExecutionMode), Budget: budgetOf(s.Budget), Metrics: metricsOf(s.Metrics),
		RetryCount: s.RetryCount, RetryInstruction: s.RetryInstruction, ToolApproval: toolApprovalOf(s.ToolApproval), TraceID: s.TraceID,
		ReloadPending: s.ReloadPending, PausedAt: s.PausedAt, StartedAt: s.StartedAt, CompletedAt: s.CompletedAt,
		CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt, Version: s.Version,
	}
	if d.EnabledSkillIDs == nil {
		d.EnabledSkillIDs = []uuid.UUID{}
	}
	if f := s.ForkedFrom; f != nil {
		d.ForkedFrom = &ForkedFrom{SessionID: f.SessionID, Checkpoint: f.Turn}
	}
	if a := s.AutoContinue; a != nil {
		ac := &AutoContinue{MaxContinuations: a.MaxContinuations, CurrentContinuationCount: a.CurrentContinuationCount,
			IsEnabled: a.IsEnabled, ValidationCriteria: []ValidationCriterion{}}
		for _, c := range a.ValidationCriteria {
			ac.ValidationCriteria = append(ac.ValidationCriteria, ValidationCriterion{Type: string(c.Type), Threshold: c.Threshold, CustomCommand: c.CustomCommand})
		}
		d.AutoContinue = ac
	}
	d.TaskList = taskListOf(s.TaskList)
	d.Plan = planOf(s.Plan)
	if o := s.Output; o != nil {
		d.Output = &Output{OutputLineCount: o.OutputLineCount, FilesChanged: o.FilesChanged, TestsAdded: o.TestsAdded,
			AllTestsPassing: o.AllTestsPassing, CommitSha: o.CommitSha}
	}
	if f := s.Failure; f != nil {
		d.Failure = &Failure{Reason: string(f.Reason), Message: f.Message}
	}
	if q := s.PendingQuestion; q != nil {
		d.PendingQuestion = &Question{Content: q.Content, Options: q.Options, AskedAt: q.AskedAt, ExpiresAt: q.ExpiresAt}
	}
	if p := s.PendingPermission; p != nil {
		r := permissionOf(*p)
		d.PendingPermission = &r
	}
	return d
}

func budgetOf(b domain.SessionBudget) SessionBudget {
	return SessionBudget{HardCapUsd: usd(b.HardCapUsd), WarnAtPercent: b.WarnAtPercent, TokensUsed: b.TokensUsed,
		EstimatedCostUsd: usd(b.EstimatedCostUsd), PercentUsed: b.PercentUsed(), RemainingUsd: usd(b.Remaining())}
}

func tokensOf(m map[string]domain.TokenUsage) map[string]TokenUsage {
	out := make(map[string]TokenUsage, len(m))
	for model, t := range m {
		out[model] = TokenUsage{InputTokens: t.InputTokens, OutputTokens: t.OutputTokens,
			CacheReadTokens: t.CacheReadTokens, CacheWriteTokens: t.CacheWriteTokens}
	}
	return out
}

func contextWindowOf(c *domain.ContextWindowSnapshot) *ContextWindow {
	if c == nil {
		return nil
	}
	return &ContextWindow{InputTokens: c.InputTokens, OutputTokens: c.OutputTokens, CacheReadTokens: c.CacheReadTokens,
		CacheWriteTokens: c.CacheWriteTokens, ModelContextLimit: c.ModelContextLimit, UsagePercent: c.UsagePercent(),
		RecordedAt: c.RecordedAt}
}

func metricsOf(m domain.SessionMetrics) SessionMetrics {
	out := SessionMetrics{
		TotalCostUsd: usd(m.TotalCostUsd), TotalTokens: m.TotalTokens(), TokenUsageByModel: tokensOf(m.TokenUsageByModel),
		ContextWindow: contextWindowOf(m.ContextWindow), ContextWindowUsagePercent: m.ContextWindowUsagePercent(),
		SubAgentMetrics: make(map[string]SubAgentMetrics, len(m.SubAgentMetrics)), TurnCount: m.TurnCount, LastTurnAt: m.LastTurnAt,
	}
	for id, sub := range m.SubAgentMetrics {
		out.SubAgentMetrics[id.String()] = SubAgentMetrics{TotalCostUsd: usd(sub.TotalCostUsd),
			TokenUsageByModel: tokensOf(sub.TokenUsageByModel), ContextWindow: contextWindowOf(sub.ContextWindow)}
	}
	return out
}

func taskListOf(l *domain.SessionTaskList) *TaskList {
	if l == nil {
		return nil
	}
	out := &TaskList{Tasks: make([]Task, 0, len(l.Tasks)), CompletedCount: l.CompletedCount(), LastUpdatedAt: l.LastUpdatedAt}
	for _, t := range l.Tasks {
		out.Tasks = append(out.Tasks, Task{ID: t.ID, Subject: t.Subject, Status: string(t.Status), ActiveForm: t.ActiveForm, UpdatedAt: t.UpdatedAt})
	}
	return out
}

func planOf(p *domain.SessionPlan) *Plan {
	if p == nil {
		return nil
	}
	return &Plan{Content: p.Content, Status: string(p.Status), RequiresApproval: p.RequiresApproval, Version: p.Version,
		Feedback: p.Feedback, CreatedAt: p.CreatedAt, ApprovedAt: p.ApprovedAt}
}

func toolApprovalOf(p domain.ToolApprovalPolicy) ToolApproval {
	return ToolApproval{Mode: string(p.Mode), Tools: p.Tools, TimeoutSeconds: int64(p.Timeout / time.Second), OnTimeout: string(p.OnTimeout)}
}

func permissionOf(p domain.PermissionRequest) PermissionRequest {
	return PermissionRequest{RequestID: p.RequestID, ToolName: p.ToolName, Input: p.Input, AskedAt: p.AskedAt, ExpiresAt: p.ExpiresAt}
}
