package api

import (
	"context"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres/queries"
)

// LogChunk is one chunk of a session's log.
type LogChunk struct {
	SequenceNumber int64     `json:"sequenceNumber" doc:"The chunk's position in the whole log, from 0." example:"0"`
	Kind           string    `json:"kind" enum:"output,decision" doc:"output: the agent's output (text, tool calls and results); decision: a decision the agent logged." example:"output"`
	Content        string    `json:"content" doc:"The chunk's text." example:"[tool] Bash {\"command\":\"go test ./...\"}"`
	RecordedAt     time.Time `json:"recordedAt" doc:"When the chunk was written." example:"2026-03-01T09:00:05Z"`
}

// SessionLog is one page of a session's log.
type SessionLog struct {
	Items    []LogChunk `json:"items" nullable:"false" doc:"The page's chunks, in log order."`
	Total    int        `json:"total" doc:"How many chunks the log has." example:"120"`
	Page     int        `json:"page" doc:"The page served, from 1." example:"1"`
	PageSize int        `json:"pageSize" doc:"The page size served." example:"100"`
}

// TranscriptMessage is one message of a session's transcript.
type TranscriptMessage struct {
	ID         uuid.UUID  `json:"id" format:"uuid" doc:"The message's id." example:"5a1d2c3b-4e5f-4a6b-8c7d-9e0f1a2b3c4d"`
	SessionID  uuid.UUID  `json:"sessionId" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	SubAgentID *uuid.UUID `json:"subAgentId,omitempty" format:"uuid" doc:"The subagent that wrote it; absent for the session's own messages." example:"8e7d6c5b-4a3f-5e2d-9c1b-0a9f8e7d6c5b"`
	Source     string     `json:"source" enum:"User,System,Agent,SubAgent,Webhook" doc:"Who wrote it." example:"Agent"`
	Content    string     `json:"content" doc:"The text." example:"The retries are in place; the tests pass."`
	ModelID    string     `json:"modelId,omitempty" doc:"The model that wrote it, when known." example:"claude-sonnet-4-5"`
	Timestamp  time.Time  `json:"timestamp" doc:"When it was written." example:"2026-03-01T09:00:05Z"`
}

// MessageList is one page of a session's messages.
type MessageList struct {
	Items    []TranscriptMessage `json:"items" nullable:"false" doc:"The page's messages, oldest first."`
	Total    int                 `json:"total" doc:"How many messages match, on all pages." example:"12"`
	Page     int                 `json:"page" doc:"The page served, from 1." example:"1"`
	PageSize int                 `json:"pageSize" doc:"The page size served." example:"20"`
}

// ToolResult is what a tool returned.
type ToolResult struct {
	Content string `json:"content" doc:"The tool's output, or its error." example:"ok  shop/http  1.2s"`
	IsError bool   `json:"isError" doc:"Whether the tool failed, was denied or was interrupted." example:"false"`
}

// ToolCall is one tool call with its result.
type ToolCall struct {
	ID          uuid.UUID   `json:"id" format:"uuid" doc:"The call's id." example:"2c3d4e5f-6a7b-5c8d-9e0f-1a2b3c4d5e6f"`
	SessionID   uuid.UUID   `json:"sessionId" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	SubAgentID  *uuid.UUID  `json:"subAgentId,omitempty" format:"uuid" doc:"The subagent that made it; absent for the session's own calls." example:"8e7d6c5b-4a3f-5e2d-9c1b-0a9f8e7d6c5b"`
	ToolName    string      `json:"toolName" doc:"The tool." example:"Bash"`
	Input       string      `json:"input" doc:"The tool's input, as JSON." example:"{\"command\":\"go test ./...\"}"`
	Status      string      `json:"status" enum:"Pending,Success,Error" doc:"Pending until the result arrives, then Success or Error." example:"Success"`
	Result      *ToolResult `json:"result,omitempty" doc:"The result; absent while Pending."`
	StartedAt   time.Time   `json:"startedAt" doc:"When the call was made." example:"2026-03-01T09:00:05Z"`
	CompletedAt *time.Time  `json:"completedAt,omitempty" doc:"When the result arrived." example:"2026-03-01T09:00:07Z"`
}

// ToolCallList is one page of a session's tool calls.
type ToolCallList struct {
	Items    []ToolCall `json:"items" nullable:"false" doc:"The page's tool calls, oldest first."`
	Total    int        `json:"total" doc:"How many calls match, on all pages." example:"30"`
	Page     int        `json:"page" doc:"The page served, from 1." example:"1"`
	PageSize int        `json:"pageSize" doc:"The page size served." example:"20"`
}

// ActivityItem is one line of a session's activity timeline.
type ActivityItem struct {
	ID         uuid.UUID  `json:"id" format:"uuid" doc:"The item's id." example:"9f8e7d6c-5b4a-5f3e-8d2c-1b0a9f8e7d6c"`
	SessionID  uuid.UUID  `json:"sessionId" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	SubAgentID *uuid.UUID `json:"subAgentId,omitempty" format:"uuid" doc:"The subagent the item is about, if any." example:"8e7d6c5b-4a3f-5e2d-9c1b-0a9f8e7d6c5b"`
	Type       string     `json:"type" enum:"Message,ToolCallStart,ToolCallEnd,SubAgentSpawn,SubAgentComplete,PlanModeEnter,PlanModeExit,UserQuestion,UserAnswer,TodoUpdate,StatusChange,MetricsUpdate,SkillEnabled,HandoffInitiated,ToolPermission,UnknownEvent" doc:"What happened." example:"ToolCallStart"`
	Summary    string     `json:"summary" doc:"One skimmable line." example:"Bash go test ./..."`
	Detail     string     `json:"detail,omitempty" doc:"The full content: the message, the tool's input or output." example:"{\"command\":\"go test ./...\"}"`
	ToolName   string     `json:"toolName,omitempty" doc:"The tool, for tool items." example:"Bash"`
	Timestamp  time.Time  `json:"timestamp" doc:"When it happened." example:"2026-03-01T09:00:05Z"`
	Cursor     int64      `json:"cursor" doc:"The item's position: pass the last one's as after to read on." example:"1042"`
	Rewound    bool       `json:"rewound,omitempty" doc:"The session was later rewound to a checkpoint before this item: it is kept, but no longer on the session's line." example:"false"`
}

// ActivityPage is a run of a session's activity.
type ActivityPage struct {
	Items      []ActivityItem `json:"items" nullable:"false" doc:"The items, oldest first."`
	NextCursor int64          `json:"nextCursor" doc:"Where to read on from (the after of the next read): the last item's cursor, or the after asked for when nothing is new." example:"1042"`
}

// LogDecisionRequest is a decision an agent logs. Either content, or a
// decision with an optional rationale.
type LogDecisionRequest struct {
	Content   string `json:"content,omitempty" maxLength:"2000" doc:"The log entry. Required unless decision is given." example:"Kept the current package layout: the tests pass and both packages are small."`
	Decision  string `json:"decision,omitempty" maxLength:"2000" doc:"The decision taken, instead of content." example:"Keep the current package layout"`
	Rationale string `json:"rationale,omitempty" maxLength:"2000" doc:"Why, with decision." example:"The tests pass and both packages are small."`
}

// LogEntry is a log entry an agent appended.
type LogEntry struct {
	ID         uuid.UUID `json:"id" format:"uuid" doc:"The entry's id." example:"6f1c2b0e-3d4a-4e5f-8a9b-0c1d2e3f4a5b"`
	SessionID  uuid.UUID `json:"sessionId" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	Kind       string    `json:"kind" enum:"decision" doc:"Always decision." example:"decision"`
	Content    string    `json:"content" doc:"The entry as logged." example:"Keep the current package layout\nRationale: the tests pass."`
	RecordedAt time.Time `json:"recordedAt" doc:"When it was logged." example:"2026-03-01T09:00:05Z"`
}

type logsInput struct {
	ID       string `path:"id" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	Page     int    `query:"page" minimum:"1" default:"1" doc:"The page, from 1." example:"1"`
	PageSize int    `query:"pageSize" minimum:"1" maximum:"100" default:"100" doc:"Chunks per page." example:"100"`
}

type transcriptInput struct {
	ID         string `path:"id" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	SubAgentID string `query:"subAgentId" format:"uuid" doc:"Only this subagent's; without it, the session's own, never a subagent's." example:"8e7d6c5b-4a3f-5e2d-9c1b-0a9f8e7d6c5b"`
	Page       int    `query:"page" minimum:"1" default:"1" doc:"The page, from 1." example:"1"`
	PageSize   int    `query:"pageSize" minimum:"1" maximum:"100" default:"20" doc:"Items per page." example:"20"`
}

type activityInput struct {
	ID         string    `path:"id" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	SubAgentID string    `query:"subAgentId" format:"uuid" doc:"Only the items about this subagent." example:"8e7d6c5b-4a3f-5e2d-9c1b-0a9f8e7d6c5b"`
	Since      time.Time `query:"since" doc:"Only the items that happened after this time." example:"2026-03-01T09:00:00Z"`
	After      int64     `query:"after" minimum:"0" doc:"Only the items after the one with this cursor (the nextCursor of the previous read)." example:"1042"`
	Limit      int       `query:"limit" minimum:"1" maximum:"1000" default:"200" doc:"The most items returned." example:"200"`
}

type logDecisionInput struct {
	ID   string `path:"id" format:"uuid" doc:"The agent's own session id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	Body LogDecisionRequest
}

type logsOutput struct{ Body SessionLog }
type messagesOutput struct{ Body MessageList }
type toolCallsOutput struct{ Body ToolCallList }
type activityOutput struct{ Body ActivityPage }
type logEntryOutput struct{ Body LogEntry }

// addTranscriptRoutes registers the reads of a session's transcript and
// the agent's log endpoint.
func (s *Server) addTranscriptRoutes(api huma.API) {
	register(api, humanOp("get-session-logs", http.MethodGet, "/api/agents/sessions/{id}/logs", "Get a session's log",
		"The session's log, for replay: the agent's output and the decisions it logged, in order.", "Transcript", queryErrors), s.getLogs)
	register(api, humanOp("get-session-messages", http.MethodGet, "/api/agents/sessions/{id}/messages", "Get a session's messages",
		"The session's own messages, oldest first, or one subagent's with subAgentId. Tool results are never messages: see the tool calls.",
		"Transcript", queryErrors), s.getMessages)
	register(api, humanOp("get-session-tool-calls", http.MethodGet, "/api/agents/sessions/{id}/tool-calls", "Get a session's tool calls",
		"The session's own tool calls with their results, oldest first, or one subagent's with subAgentId.", "Transcript", queryErrors), s.getToolCalls)
	register(api, humanOp("get-session-activity", http.MethodGet, "/api/agents/sessions/{id}/activity", "Get a session's activity",
		"The session's activity timeline, oldest first: after a cursor or a time, optionally about one subagent only.", "Transcript", queryErrors), s.getActivity)

	logOp := huma.Operation{
		OperationID: "agent-log-decision", Method: http.MethodPost, Path: "/api/agent/sessions/{id}/log",
		Summary:     "Log a decision",
		Description: "Called by the agent to append a decision to its session's log, for the owner's review. It does not change the session.",
		Tags:        []string{"Agent API"}, Security: AgentAuth, Errors: commandErrors, DefaultStatus: http.StatusCreated,
	}
	register(api, logOp, s.logDecision)
}

// optionalUUID parses an optional query id that Huma already checked.
func optionalUUID(field, raw string) (*uuid.UUID, error) {
	if raw == "" {
		return nil, nil
	}
	id, err := parseID(field, raw)
	return &id, err
}

func (s *Server) getLogs(ctx context.Context, in *logsInput) (*logsOutput, error) {
	owner, id, err := s.readOwned(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	page, err := s.deps.Queries.Logs(ctx, owner, id, queries.Paging{Page: in.Page, PageSize: in.PageSize})
	if err != nil {
		return nil, err
	}
	out := &logsOutput{Body: SessionLog{Items: make([]LogChunk, 0, len(page.Items)), Total: page.Total, Page: page.Page, PageSize: page.PageSize}}
	for _, c := range page.Items {
		out.Body.Items = append(out.Body.Items, LogChunk{SequenceNumber: c.SequenceNumber, Kind: c.Kind, Content: c.Content, RecordedAt: c.RecordedAt})
	}
	return out, nil
}

// transcriptParams reads the caller, the session and the subagent filter.
func (s *Server) transcriptParams(ctx context.Context, in *transcriptInput) (queries.TranscriptParams, error) {
	owner, id, err := s.readOwned(ctx, in.ID)
	if err != nil {
		return queries.TranscriptParams{}, err
	}
	sub, err := optionalUUID("query.subAgentId", in.SubAgentID)
	return queries.TranscriptParams{Owner: owner, Session: id, SubAgentID: sub,
		Paging: queries.Paging{Page: in.Page, PageSize: in.PageSize}}, err
}

func (s *Server) getMessages(ctx context.Context, in *transcriptInput) (*messagesOutput, error) {
	p, err := s.transcriptParams(ctx, in)
	if err != nil {
		return nil, err
	}
	page, err := s.deps.Queries.Messages(ctx, p)
	if err != nil {
		return nil, err
	}
	out := &messagesOutput{Body: MessageList{Items: make([]TranscriptMessage, 0, len(page.Items)), Total: page.Total, Page: page.Page, PageSize: page.PageSize}}
	for _, m := range page.Items {
		out.Body.Items = append(out.Body.Items, TranscriptMessage{ID: m.ID, SessionID: m.SessionID, SubAgentID: m.SubAgentID,
			Source: string(m.Source), Content: m.Content, ModelID: m.ModelID, Timestamp: m.Timestamp})
	}
	return out, nil
}

func (s *Server) getToolCalls(ctx context.Context, in *transcriptInput) (*toolCallsOutput, error) {
	p, err := s.transcriptParams(ctx, in)
	if err != nil {
		return nil, err
	}
	page, err := s.deps.Queries.ToolCalls(ctx, p)
	if err != nil {
		return nil, err
	}
	out := &toolCallsOutput{Body: ToolCallList{Items: make([]ToolCall, 0, len(page.Items)), Total: page.Total, Page: page.Page, PageSize: page.PageSize}}
	for _, c := range page.Items {
		call := ToolCall{ID: c.ID, SessionID: c.SessionID, SubAgentID: c.SubAgentID, ToolName: c.ToolName, Input: c.Input,
			Status: string(c.Status), StartedAt: c.StartedAt, CompletedAt: c.CompletedAt}
		if c.Result != nil {
			call.Result = &ToolResult{Content: c.Result.Content, IsError: c.Result.IsError}
		}
		out.Body.Items = append(out.Body.Items, call)
	}
	return out, nil
}

func (s *Server) getActivity(ctx context.Context, in *activityInput) (*activityOutput, error) {
	owner, id, err := s.readOwned(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	sub, err := optionalUUID("query.subAgentId", in.SubAgentID)
	if err != nil {
		return nil, err
	}
	page, err := s.deps.Queries.Activity(ctx, queries.ActivityParams{Owner: owner, Session: id, SubAgentID: sub,
		Since: in.Since, After: in.After, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	cps, err := s.deps.Queries.Checkpoints(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	out := &activityOutput{Body: ActivityPage{Items: make([]ActivityItem, 0, len(page.Items)), NextCursor: page.NextCursor}}
	for _, it := range page.Items {
		out.Body.Items = append(out.Body.Items, ActivityItem{ID: it.ID, SessionID: it.SessionID, SubAgentID: it.SubAgentID,
			Type: string(it.Type), Summary: it.Summary, Detail: it.Detail, ToolName: it.ToolName, Timestamp: it.Timestamp, Cursor: it.Cursor,
			Rewound: queries.Rewound(cps, it.Cursor)})
	}
	return out, nil
}

// logDecision sends LogDecision; the commands worker appends the entry
// (see handlers/commands for why it goes through a command).
func (s *Server) logDecision(ctx context.Context, in *logDecisionInput) (*logEntryOutput, error) {
	id, err := parseID("path.id", in.ID)
	if err != nil {
		return nil, err
	}
	content, err := decisionContent(in.Body)
	if err != nil {
		return nil, err
	}
	raw, err := s.send(ctx, domain.AggregateSession, command.LogDecision, id, command.LogDecisionData{Content: content},
		map[string]string{"content": "body.content"})
	if err != nil {
		return nil, err
	}
	res, err := decodeState[command.LogChunkResult](raw)
	if err != nil {
		return nil, err
	}
	return &logEntryOutput{Body: LogEntry{ID: res.ID, SessionID: res.SessionID, Kind: res.Kind, Content: res.Content, RecordedAt: res.RecordedAt}}, nil
}

// decisionContent is the entry a request logs: its content, or its
// decision followed by the rationale.
func decisionContent(b LogDecisionRequest) (string, error) {
	content, field := strings.TrimSpace(b.Content), "body.content"
	if content == "" {
		content, field = strings.TrimSpace(b.Decision), "body.decision"
		if r := strings.TrimSpace(b.Rationale); content != "" && r != "" {
			content += "\nRationale: " + r
		}
	}
	if content == "" {
		return "", NewKindError(KindValidation, "content, or a decision, is required").WithField("body.content")
	}
	if utf8.RuneCountInString(content) > command.MaxLogDecisionChars {
		return "", NewKindError(KindValidation, "the entry must be at most 2000 characters").WithField(field)
	}
	return content, nil
}
