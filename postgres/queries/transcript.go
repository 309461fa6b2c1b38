package queries

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/domain"
)

// Activity limits (GetSessionActivityStreamQuery).
const (
	// DefaultActivityLimit is how many activity items a read returns when
	// no limit is asked for.
	DefaultActivityLimit = 200
	// MaxActivityLimit is the most activity items one read returns.
	MaxActivityLimit = 1000
)

// TranscriptParams asks for one page of a session's messages or tool calls.
type TranscriptParams struct {
	// Owner is the caller; another owner's session is not found.
	Owner uuid.UUID
	// Session is the session read.
	Session uuid.UUID
	// SubAgentID selects one subagent's items; nil selects the parent
	// session's own, never a subagent's.
	SubAgentID *uuid.UUID
	// Paging selects the page, in the order the items were written.
	Paging Paging
}

// Message is one message of a session's transcript (AgentMessageDto).
type Message struct {
	ID         uuid.UUID
	SessionID  uuid.UUID
	SubAgentID *uuid.UUID
	Source     domain.AgentMessageSource
	Content    string
	// ModelID is the model that wrote the message, when the engine said.
	ModelID   string
	Timestamp time.Time
}

// SubAgent is a subagent the session's agent spawned.
type SubAgent struct {
	domain.SubAgentSessionSnapshot
	// EngineID is the engine's own name for the subagent.
	EngineID string
	// Type is the subagent's definition name.
	Type string
}

// LogChunk is one chunk of a session's log: the agent's output, or a
// decision it logged.
type LogChunk struct {
	domain.SessionLogChunk
	// Kind is output or decision.
	Kind string
}

// ActivityParams asks for a session's activity after a point.
type ActivityParams struct {
	Owner   uuid.UUID
	Session uuid.UUID
	// SubAgentID selects one subagent's items; nil selects all items.
	SubAgentID *uuid.UUID
	// Since, when set, selects the items that happened after it.
	Since time.Time
	// After, when above zero, selects the items after the one whose Cursor
	// it is: the cursor of the last item read, to read on.
	After int64
	// Limit is the most items returned; 0 means DefaultActivityLimit, and
	// it is capped at MaxActivityLimit.
	Limit int
}

// ActivityEntry is an activity item and its position in the stream.
type ActivityEntry struct {
	domain.ActivityItem
	// Cursor orders the items; pass the last one's as After to read on.
	Cursor int64
}

// ActivityPage is a run of activity items, oldest first.
type ActivityPage struct {
	Items []ActivityEntry
	// NextCursor is the cursor to read on from: the last item's, or the
	// After asked for when there is nothing new.
	NextCursor int64
}

// ownSession reports a session that does not exist or is another owner's
// as not found.
func (s *Store) ownSession(ctx context.Context, owner, id uuid.UUID) error {
	var ok bool
	if err := s.db.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM sessions WHERE id = $1 AND owner_id = $2)", id, owner).Scan(&ok); err != nil {
		return fmt.Errorf("queries: session %s: %w", id, err)
	}
	if !ok {
		return &NotFoundError{Entity: "session", ID: id.String()}
	}
	return nil
}

// transcriptPage counts one session's rows of table, the parent's or one
// subagent's, and reads a page of them in stream order.
func transcriptPage[T any](ctx context.Context, s *Store, p TranscriptParams, table, columns string, scan func(pgx.Rows) (T, error)) (Page[T], error) {
	pg := p.Paging.normalize()
	out := Page[T]{Items: []T{}, Page: pg.Page, PageSize: pg.PageSize}
	if err := s.ownSession(ctx, p.Owner, p.Session); err != nil {
		return out, err
	}
	// Two shapes of the filter, so that both use the (session, subagent)
	// index: NULL is never equal to a parameter.
	where, args := " FROM "+table+" WHERE session_id = $1 AND subagent_id IS NULL", []any{p.Session}
	if p.SubAgentID != nil {
		where, args = " FROM "+table+" WHERE session_id = $1 AND subagent_id = $2", []any{p.Session, *p.SubAgentID}
	}
	if err := s.db.QueryRow(ctx, "SELECT count(*)"+where, args...).Scan(&out.Total); err != nil {
		return out, fmt.Errorf("queries: %s of %s: %w", table, p.Session, err)
	}
	n := len(args)
	rows, err := s.db.Query(ctx, fmt.Sprintf("SELECT %s%s ORDER BY source_seq LIMIT $%d OFFSET $%d", columns, where, n+1, n+2),
		append(args, pg.PageSize, pg.offset())...)
	if err != nil {
		return out, fmt.Errorf("queries: %s of %s: %w", table, p.Session, err)
	}
	defer rows.Close()
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return out, fmt.Errorf("queries: %s of %s: %w", table, p.Session, err)
		}
		out.Items = append(out.Items, v)
	}
	return out, rows.Err()
}

// Messages returns a page of the session's messages, oldest first
// (GetSessionMessagesQuery): the parent session's own, or with SubAgentID
// that subagent's only.
func (s *Store) Messages(ctx context.Context, p TranscriptParams) (Page[Message], error) {
	return transcriptPage(ctx, s, p, "agent_messages", "id, session_id, subagent_id, source, content, model_id, occurred_at",
		func(rows pgx.Rows) (Message, error) {
			var m Message
			var source string
			err := rows.Scan(&m.ID, &m.SessionID, &m.SubAgentID, &source, &m.Content, &m.ModelID, &m.Timestamp)
			m.Source = domain.AgentMessageSource(source)
			return m, err
		})
}

// ToolCalls returns a page of the session's tool calls with their results,
// oldest first (GetSessionToolCallsQuery): the parent session's own, or
// with SubAgentID that subagent's only.
func (s *Store) ToolCalls(ctx context.Context, p TranscriptParams) (Page[domain.ToolCallSnapshot], error) {
	return transcriptPage(ctx, s, p, "tool_calls",
		"id, session_id, subagent_id, tool_name, input, status, result, result_is_error, started_at, completed_at",
		func(rows pgx.Rows) (domain.ToolCallSnapshot, error) {
			var (
				c       domain.ToolCallSnapshot
				status  string
				result  *string
				isError *bool
			)
			err := rows.Scan(&c.ID, &c.SessionID, &c.SubAgentID, &c.ToolName, &c.Input, &status, &result, &isError, &c.StartedAt, &c.CompletedAt)
			c.Status = domain.ToolCallStatus(status)
			if result != nil {
				c.Result = &domain.ToolResult{Content: *result, IsError: isError != nil && *isError}
			}
			return c, err
		})
}

// SubAgents returns the subagents the session's agent spawned, in the
// order they appeared.
func (s *Store) SubAgents(ctx context.Context, owner, id uuid.UUID) ([]SubAgent, error) {
	if err := s.ownSession(ctx, owner, id); err != nil {
		return nil, err
	}
	rows, err := s.db.Query(ctx, `
SELECT id, session_id, model_id, objective, status, failure_reason, started_at, completed_at, engine_subagent_id, subagent_type
  FROM subagent_sessions WHERE session_id = $1 ORDER BY source_seq`, id)
	if err != nil {
		return nil, fmt.Errorf("queries: subagents of %s: %w", id, err)
	}
	defer rows.Close()
	out := []SubAgent{}
	for rows.Next() {
		var (
			a              SubAgent
			status, reason string
		)
		if err := rows.Scan(&a.ID, &a.ParentSessionID, &a.ModelID, &a.Objective, &status, &reason, &a.StartedAt,
			&a.CompletedAt, &a.EngineID, &a.Type); err != nil {
			return nil, fmt.Errorf("queries: subagents of %s: %w", id, err)
		}
		a.Status, a.FailureReason = domain.SessionStatus(status), domain.FailureReason(reason)
		out = append(out, a)
	}
	return out, rows.Err()
}

// Logs returns a page of the session's log in order
// (GetSessionOutputStreamQuery): its output and the decisions the agent
// logged, by the time they were recorded. SequenceNumber is each chunk's
// position in the whole log, from 0.
func (s *Store) Logs(ctx context.Context, owner, id uuid.UUID, paging Paging) (Page[LogChunk], error) {
	pg := paging.normalize()
	out := Page[LogChunk]{Items: []LogChunk{}, Page: pg.Page, PageSize: pg.PageSize}
	if err := s.ownSession(ctx, owner, id); err != nil {
		return out, err
	}
	if err := s.db.QueryRow(ctx, "SELECT count(*) FROM session_log_chunks WHERE session_id = $1", id).Scan(&out.Total); err != nil {
		return out, fmt.Errorf("queries: log of %s: %w", id, err)
	}
	rows, err := s.db.Query(ctx, `
SELECT row_number() OVER w - 1, kind, content, recorded_at
  FROM session_log_chunks WHERE session_id = $1
WINDOW w AS (ORDER BY recorded_at, source_seq NULLS LAST, id)
 ORDER BY recorded_at, source_seq NULLS LAST, id
 LIMIT $2 OFFSET $3`, id, pg.PageSize, pg.offset())
	if err != nil {
		return out, fmt.Errorf("queries: log of %s: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var c LogChunk
		if err := rows.Scan(&c.SequenceNumber, &c.Kind, &c.Content, &c.RecordedAt); err != nil {
			return out, fmt.Errorf("queries: log of %s: %w", id, err)
		}
		out.Items = append(out.Items, c)
	}
	return out, rows.Err()
}

// Activity returns the session's activity items after a point, oldest
// first (GetSessionActivityStreamQuery), optionally one subagent's only.
func (s *Store) Activity(ctx context.Context, p ActivityParams) (ActivityPage, error) {
	limit := p.Limit
	switch {
	case limit <= 0:
		limit = DefaultActivityLimit
	case limit > MaxActivityLimit:
		limit = MaxActivityLimit
	}
	out := ActivityPage{Items: []ActivityEntry{}, NextCursor: p.After}
	if err := s.ownSession(ctx, p.Owner, p.Session); err != nil {
		return out, err
	}
	var sub, since any
	if p.SubAgentID != nil {
		sub = p.SubAgentID.String()
	}
	if !p.Since.IsZero() {
		since = p.Since
	}
	rows, err := s.db.Query(ctx, `
SELECT source_seq, id, session_id, subagent_id, type, summary, detail, tool_name, occurred_at
  FROM activity_items
 WHERE session_id = $1 AND source_seq > $2
   AND ($3::text IS NULL OR subagent_id = $3::text)
   AND ($4::timestamptz IS NULL OR occurred_at > $4::timestamptz)
 ORDER BY source_seq
 LIMIT $5`, p.Session, p.After, sub, since, limit)
	if err != nil {
		return out, fmt.Errorf("queries: activity of %s: %w", p.Session, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			e        ActivityEntry
			subagent *string
			typ      string
		)
		if err := rows.Scan(&e.Cursor, &e.ID, &e.SessionID, &subagent, &typ, &e.Summary, &e.Detail, &e.ToolName, &e.Timestamp); err != nil {
			return out, fmt.Errorf("queries: activity of %s: %w", p.Session, err)
		}
		e.Type = domain.ActivityItemType(typ)
		if subagent != nil {
			if u, err := uuid.Parse(*subagent); err == nil {
				e.SubAgentID = &u
			}
		}
		out.Items = append(out.Items, e)
		out.NextCursor = e.Cursor
	}
	return out, rows.Err()
}
