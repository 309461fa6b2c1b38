package localsocket

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/agentbus/agentbus/doors"
)

// writer writes one JSON object per line; lines of concurrent writers
// never mix.
type writer struct {
	mu      sync.Mutex
	c       net.Conn
	timeout time.Duration
	failed  bool
}

func (w *writer) write(v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	raw = append(raw, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed {
		return net.ErrClosed
	}
	_ = w.c.SetWriteDeadline(time.Now().Add(w.timeout))
	if _, err := w.c.Write(raw); err != nil {
		w.failed = true
		return err
	}
	return nil
}

// conn is one client connection: its session ids, chosen by the client,
// and the agentbus sessions they name.
type conn struct {
	cfg    Config
	out    *writer
	cancel context.CancelFunc
	doors  *doors.Conn

	mu      sync.Mutex
	byName  map[string]uuid.UUID
	byID    map[uuid.UUID]string
	pending map[uuid.UUID]string // an input's message id -> the client's requestId
}

func newConn(cfg Config, out *writer, cancel context.CancelFunc) *conn {
	return &conn{cfg: cfg, out: out, cancel: cancel,
		byName: map[string]uuid.UUID{}, byID: map[uuid.UUID]string{}, pending: map[uuid.UUID]string{}}
}

// Inbound is a message from the client (seed 002's inbound types).
type Inbound struct {
	Type      string `json:"type"`
	SessionID string `json:"sessionId"`
	// RequestID correlates a permission or question response, or any
	// message with its answer.
	RequestID string `json:"requestId,omitempty"`

	// start_session
	Prompt        string          `json:"prompt,omitempty"`
	Cwd           string          `json:"cwd,omitempty"`
	Model         string          `json:"model,omitempty"`
	Name          string          `json:"name,omitempty"`
	BudgetCapUsd  float64         `json:"budgetCapUsd,omitempty"`
	TemplateID    string          `json:"templateId,omitempty"`
	ToolApproval  json.RawMessage `json:"toolApproval,omitempty"`
	SkillIDs      []string        `json:"skillIds,omitempty"`
	WarnAtPercent int             `json:"warnAtPercent,omitempty"`
	// send_prompt
	Priority  string `json:"priority,omitempty"`
	TimeoutMS int64  `json:"timeoutMs,omitempty"`
	// resume_session
	AgentbusSessionID string `json:"agentbusSessionId,omitempty"`
	LastEventID       uint64 `json:"lastEventId,omitempty"`
	// permission_response
	Behavior string `json:"behavior,omitempty"`
	Message  string `json:"message,omitempty"`
	// question_response
	Answers json.RawMessage `json:"answers,omitempty"`
	Answer  string          `json:"answer,omitempty"`
	// close_session
	Force bool `json:"force,omitempty"`
}

// serve reads lines until the client goes away; each line is carried out
// in order, and a bad one gets an error and the connection goes on.
func (c *conn) serve(ctx context.Context, r *bufio.Reader) {
	lines := make(chan []byte, 2*c.cfg.Burst)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for line := range lines {
			c.handle(ctx, line)
		}
	}()
	defer func() {
		close(lines)
		<-done
	}()
	for {
		line, size, err := readLine(r, c.cfg.MaxMessageBytes)
		if err != nil {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				slog.Debug("local socket: read", "component", "localsocket", "err", err)
			}
			return
		}
		if e := c.doors.Allow(); e != nil {
			c.error("", "", e)
			continue
		}
		if size > c.cfg.MaxMessageBytes {
			c.error("", "", &doors.Error{Kind: doors.KindValidation, Status: http.StatusRequestEntityTooLarge,
				Message: fmt.Sprintf("the line has %d bytes, more than the %d a message may have; it was not read", size, c.cfg.MaxMessageBytes)})
			continue
		}
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		select {
		case lines <- line:
		case <-ctx.Done():
			return
		}
	}
}

// readLine reads one line of at most max bytes; a longer one is read to
// its end and dropped, and its size returned.
func readLine(r *bufio.Reader, max int) ([]byte, int, error) {
	var line []byte
	size := 0
	for {
		chunk, err := r.ReadSlice('\n')
		size += len(chunk)
		if size <= max+1 {
			line = append(line, chunk...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return nil, size, err
		}
		line = line[:len(line)-1]
		return line, size - 1, nil
	}
}

func (c *conn) error(sessionName, requestID string, err error) {
	var e *doors.Error
	if !errors.As(err, &e) {
		if errors.Is(err, context.Canceled) {
			return
		}
		slog.Error("local socket: command failed", "component", "localsocket", "err", err)
		e = &doors.Error{Kind: doors.KindInternal, Message: "internal error"}
	}
	c.write(map[string]any{"type": "error", "sessionId": sessionName, "requestId": requestID, "kind": e.Kind, "message": e.Message,
		"status": e.Status, "field": e.Field, "currentStatus": e.CurrentStatus, "retryAfterSeconds": e.RetryAfterSeconds})
}

// write writes a message, dropping its empty fields.
func (c *conn) write(m map[string]any) {
	for k, v := range m {
		switch v := v.(type) {
		case string:
			if v == "" {
				delete(m, k)
			}
		case int:
			if v == 0 {
				delete(m, k)
			}
		case uint64:
			if v == 0 {
				delete(m, k)
			}
		case nil:
			delete(m, k)
		}
	}
	if err := c.out.write(m); err != nil {
		c.cancel()
	}
}

func (c *conn) session(name string) (uuid.UUID, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.byName[name]
	if !ok {
		return uuid.Nil, &doors.Error{Kind: doors.KindValidation, Status: http.StatusUnprocessableEntity, Field: "sessionId",
			Message: fmt.Sprintf("no session %q on this connection: start_session or resume_session first", name)}
	}
	return id, nil
}

func (c *conn) name(id uuid.UUID) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byID[id]
}

// claim takes a client session id for a new session.
func (c *conn) claim(name string) error {
	if name == "" {
		return &doors.Error{Kind: doors.KindValidation, Status: http.StatusUnprocessableEntity, Field: "sessionId", Message: "sessionId is required"}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byName[name]; ok {
		return &doors.Error{Kind: doors.KindConflict, Status: http.StatusConflict, Field: "sessionId",
			Message: fmt.Sprintf("session %q is already on this connection", name)}
	}
	c.byName[name] = uuid.Nil
	return nil
}

func (c *conn) bind(name string, id uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == uuid.Nil {
		delete(c.byName, name)
		return
	}
	c.byName[name], c.byID[id] = id, name
}

func (c *conn) unbind(name string, id uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byName, name)
	delete(c.byID, id)
}

func (c *conn) handle(ctx context.Context, line []byte) {
	var m Inbound
	if err := json.Unmarshal(line, &m); err != nil {
		c.error("", "", doors.Errorf(doors.KindValidation, "the line is not a JSON object: %v", err))
		return
	}
	if err := c.do(ctx, m); err != nil {
		c.error(m.SessionID, m.RequestID, err)
	}
}

func (c *conn) do(ctx context.Context, m Inbound) error {
	switch m.Type {
	case "start_session":
		return c.start(ctx, m)
	case "resume_session":
		return c.resume(ctx, m)
	case typeAuthenticate:
		return doors.Errorf(doors.KindValidation, "this connection is already authenticated: authenticate is only its first message")
	}
	id, err := c.session(m.SessionID)
	if err != nil {
		if _, known := inboundTypes[m.Type]; !known {
			return unknownType(m.Type)
		}
		return err
	}
	switch m.Type {
	case "send_prompt":
		msgID, err := c.doors.Input(ctx, id, m.Prompt, m.Priority, time.Duration(m.TimeoutMS)*time.Millisecond, m.RequestID)
		if err != nil {
			return err
		}
		c.write(map[string]any{"type": "session_status", "sessionId": m.SessionID, "requestId": m.RequestID, "status": "prompt_queued", "messageId": msgID.String()})
		return nil
	case "permission_response":
		var allow bool
		switch m.Behavior {
		case "allow":
			allow = true
		case "deny":
		default:
			return &doors.Error{Kind: doors.KindValidation, Status: http.StatusUnprocessableEntity, Field: "behavior", Message: `behavior must be "allow" or "deny"`}
		}
		return c.status(m)(c.doors.Decide(ctx, id, m.RequestID, allow, m.Message))
	case "question_response":
		return c.status(m)(c.doors.Command(ctx, id, "answer", map[string]string{"answer": answerOf(m)}))
	case "interrupt":
		return c.status(m)(c.doors.Command(ctx, id, "interrupt", nil))
	case "close_session":
		path := "cancel"
		if m.Force {
			path = "force-cancel"
		}
		s, err := c.doors.Command(ctx, id, path, nil)
		c.doors.Detach(id)
		c.unbind(m.SessionID, id)
		if err != nil {
			return err
		}
		c.write(map[string]any{"type": "session_status", "sessionId": m.SessionID, "requestId": m.RequestID, "status": "closed", "agentbusStatus": s.Status})
		return nil
	}
	return unknownType(m.Type)
}

var inboundTypes = map[string]struct{}{"start_session": {}, "send_prompt": {}, "resume_session": {}, "permission_response": {},
	"question_response": {}, "interrupt": {}, "close_session": {}}

func unknownType(t string) error {
	return doors.Errorf(doors.KindValidation, "unknown message type %q; known: start_session, send_prompt, resume_session, "+
		"permission_response, question_response, interrupt, close_session", t)
}

// status answers a command with the session's new status.
func (c *conn) status(m Inbound) func(doors.Session, error) error {
	return func(s doors.Session, err error) error {
		if err != nil {
			return err
		}
		c.write(map[string]any{"type": "session_status", "sessionId": m.SessionID, "requestId": m.RequestID,
			"status": clientStatus(s.Status), "agentbusStatus": s.Status})
		return nil
	}
}

// answerOf is the answer of a question_response: answer, or the answers
// (seed 002 sends them by question) joined.
func answerOf(m Inbound) string {
	if m.Answer != "" || len(m.Answers) == 0 {
		return m.Answer
	}
	var s string
	if json.Unmarshal(m.Answers, &s) == nil {
		return s
	}
	var list []string
	if json.Unmarshal(m.Answers, &list) == nil {
		return strings.Join(list, "\n")
	}
	var byQuestion map[string]string
	if json.Unmarshal(m.Answers, &byQuestion) == nil {
		parts := make([]string, 0, len(byQuestion))
		for _, a := range byQuestion {
			parts = append(parts, a)
		}
		return strings.Join(parts, "\n")
	}
	return string(m.Answers)
}

func (c *conn) start(ctx context.Context, m Inbound) error {
	if err := c.claim(m.SessionID); err != nil {
		return err
	}
	body := map[string]any{"objective": m.Prompt}
	set := func(k string, v any, ok bool) {
		if ok {
			body[k] = v
		}
	}
	set("workingDirectory", m.Cwd, m.Cwd != "")
	set("modelId", m.Model, m.Model != "")
	set("name", m.Name, m.Name != "")
	set("budgetCapUsd", m.BudgetCapUsd, m.BudgetCapUsd != 0)
	set("templateId", m.TemplateID, m.TemplateID != "")
	set("toolApproval", m.ToolApproval, len(m.ToolApproval) > 0)
	set("skillIds", m.SkillIDs, len(m.SkillIDs) > 0)
	set("warnAtPercent", m.WarnAtPercent, m.WarnAtPercent != 0)
	// The session's name must be bound before its feed starts, or its
	// first items would have no name to go out with.
	id, err := c.startBound(ctx, m.SessionID, body)
	if err != nil {
		c.bind(m.SessionID, uuid.Nil)
		return err
	}
	c.write(map[string]any{"type": "session_status", "sessionId": m.SessionID, "requestId": m.RequestID, "status": "started",
		"agentbusSessionId": id.String()})
	return nil
}

func (c *conn) startBound(ctx context.Context, name string, body map[string]any) (uuid.UUID, error) {
	s, err := c.doors.StartBound(ctx, body, func(id uuid.UUID) { c.bind(name, id) })
	return s.ID, err
}

func (c *conn) resume(ctx context.Context, m Inbound) error {
	id, err := uuid.Parse(m.AgentbusSessionID)
	if err != nil {
		return &doors.Error{Kind: doors.KindValidation, Status: http.StatusUnprocessableEntity, Field: "agentbusSessionId",
			Message: "agentbusSessionId must be the id of one of your sessions (a UUID)"}
	}
	if err := c.claim(m.SessionID); err != nil {
		return err
	}
	c.bind(m.SessionID, id)
	s, err := c.doors.Attach(ctx, id, m.LastEventID)
	if err != nil {
		c.unbind(m.SessionID, id)
		return err
	}
	c.write(map[string]any{"type": "session_status", "sessionId": m.SessionID, "requestId": m.RequestID, "status": "resumed",
		"agentbusSessionId": id.String(), "agentbusStatus": s.Status})
	return nil
}
