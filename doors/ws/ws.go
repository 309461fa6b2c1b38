// Package ws is seed 004's WebSocket door, GET /api/agents/ws: one
// connection carries many sessions, each message names its session, and
// every command is the HTTP API's own (doors). Messages are JSON text
// frames {type, sessionId, data, timestamp}; see docs/websocket.md.
package ws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/api"
	"github.com/agentbus/agentbus/command/control"
	"github.com/agentbus/agentbus/doors"
)

// Path is where the door is served.
const Path = "/api/agents/ws"

// Config is the door's configuration.
type Config struct {
	doors.Config
	// PingInterval is how often the server pings a connection; a
	// connection that does not answer within the interval is closed.
	// Default 30s.
	PingInterval time.Duration
	// WriteTimeout bounds each write to a client: one that reads slower
	// is disconnected, and resumes with its last event ids. Default 10s.
	WriteTimeout time.Duration
}

// Authenticator checks a bearer Authorization header (*api.Server is one).
type Authenticator interface {
	AuthenticateBearer(header string) (ownerID string, err error)
}

// Handler serves the WebSocket door.
type Handler struct {
	cfg  Config
	auth Authenticator
	// api is the HTTP API the commands go to, in this process.
	api  http.Handler
	feed doors.Feed
}

// NewHandler returns the door: commands go to api as the connection's
// caller, feeds are read from feed.
func NewHandler(cfg Config, auth Authenticator, apiHandler http.Handler, feed doors.Feed) *Handler {
	cfg.Config = cfg.Config.WithDefaults()
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 30 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	return &Handler{cfg: cfg, auth: auth, api: apiHandler, feed: feed}
}

// ServeHTTP authenticates the upgrade (Authorization: Bearer, or the
// token query parameter for browsers, which cannot set headers on a
// WebSocket) and serves the connection until either side closes it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	authz := r.Header.Get("Authorization")
	if authz == "" && r.URL.Query().Get("token") != "" {
		authz = "Bearer " + r.URL.Query().Get("token")
	}
	if _, err := h.auth.AuthenticateBearer(authz); err != nil {
		api.WriteProblem(w, err)
		return
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept answered the client
	}
	// Messages are read through a reader capped by the door itself, so an
	// oversized one is refused with an error and the connection stays.
	c.SetReadLimit(-1)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	s := &conn{h: h, ws: c, cancel: cancel}
	s.doors = doors.NewConn(ctx, h.cfg.Config, doors.InProcess{Handler: h.api, Authorization: authz}, h.feed, s)
	defer s.doors.Close()
	go s.keepAlive(ctx)
	s.readLoop(ctx)
	_ = c.Close(websocket.StatusNormalClosure, "")
}

// ClientMessage is a message from the client.
type ClientMessage struct {
	// Type is the command: start, or one of commandNames (which holds
	// the controls of the control table).
	Type string `json:"type"`
	// SessionID names the session (all but start).
	SessionID string `json:"sessionId,omitempty"`
	// Data is the command's parameters.
	Data json.RawMessage `json:"data,omitempty"`
	// Timestamp is the client's clock, Unix milliseconds; informative.
	Timestamp int64 `json:"timestamp,omitempty"`
	// ID is the client's reference for the message: the answers to it
	// carry it as replyTo.
	ID string `json:"id,omitempty"`
}

// ServerMessage is a message to the client.
type ServerMessage struct {
	Type      string `json:"type"`
	SessionID string `json:"sessionId,omitempty"`
	Data      any    `json:"data"`
	Timestamp int64  `json:"timestamp"`
	// EventID is the position of a feed item: subscribe with it as
	// lastEventId to resume after it.
	EventID uint64 `json:"eventId,omitempty"`
	// ReplyTo is the id of the client message this answers.
	ReplyTo string `json:"replyTo,omitempty"`
}

type conn struct {
	h      *Handler
	ws     *websocket.Conn
	doors  *doors.Conn
	cancel context.CancelFunc
}

func (s *conn) send(m ServerMessage) error {
	if m.Timestamp == 0 {
		m.Timestamp = time.Now().UnixMilli()
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.h.cfg.WriteTimeout)
	defer cancel()
	if err := s.ws.Write(ctx, websocket.MessageText, raw); err != nil {
		s.cancel() // a client that cannot take its messages reconnects
		return err
	}
	return nil
}

func (s *conn) sendError(sessionID, replyTo string, err error) {
	var e *doors.Error
	if !errors.As(err, &e) {
		if errors.Is(err, context.Canceled) {
			return
		}
		slog.Error("websocket: command failed", "component", "websocket", "err", err)
		e = &doors.Error{Kind: doors.KindInternal, Message: "internal error"}
	}
	_ = s.send(ServerMessage{Type: "error", SessionID: sessionID, Data: e, ReplyTo: replyTo})
}

// keepAlive pings the client; one that does not answer is closed.
func (s *conn) keepAlive(ctx context.Context) {
	t := time.NewTicker(s.h.cfg.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pctx, cancel := context.WithTimeout(ctx, s.h.cfg.PingInterval)
			err := s.ws.Ping(pctx)
			cancel()
			if err != nil {
				_ = s.ws.Close(websocket.StatusPolicyViolation, "no pong")
				s.cancel()
				return
			}
		}
	}
}

// readLoop reads the client's messages and hands them, in order, to one
// goroutine that carries them out: reading never waits for a command, so
// pongs are read while a command runs.
func (s *conn) readLoop(ctx context.Context) {
	queue := make(chan ClientMessage, 2*s.h.cfg.Burst)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range queue {
			s.handle(ctx, m)
		}
	}()
	defer func() {
		close(queue)
		<-done
	}()
	max := s.h.cfg.MaxMessageBytes
	for {
		typ, r, err := s.ws.Reader(ctx)
		if err != nil {
			return
		}
		raw, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
		if err != nil {
			return
		}
		if e := s.doors.Allow(); e != nil {
			_, _ = io.Copy(io.Discard, r)
			s.sendError("", "", e)
			continue
		}
		if len(raw) > max {
			n, err := io.Copy(io.Discard, r)
			if err != nil {
				return
			}
			s.sendError("", "", &doors.Error{Kind: doors.KindValidation, Status: http.StatusRequestEntityTooLarge,
				Message: fmt.Sprintf("the message has %d bytes, more than the %d a message may have; it was not read", int64(len(raw))+n, max)})
			continue
		}
		if typ != websocket.MessageText {
			s.sendError("", "", doors.Errorf(doors.KindValidation, "messages are JSON text frames"))
			continue
		}
		var m ClientMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			s.sendError("", "", doors.Errorf(doors.KindValidation, "the message is not a JSON object: %v", err))
			continue
		}
		select {
		case queue <- m:
		case <-ctx.Done():
			return
		}
	}
}

// handle carries out one client message; its failure is an error message
// and the connection goes on.
func (s *conn) handle(ctx context.Context, m ClientMessage) {
	reply := func(sess doors.Session, err error) {
		if err != nil {
			s.sendError(m.SessionID, m.ID, err)
			return
		}
		_ = s.send(ServerMessage{Type: "state", SessionID: sess.ID.String(), Data: sess, ReplyTo: m.ID})
	}
	if m.Type == "start" {
		if len(m.Data) == 0 {
			reply(doors.Session{}, fieldError("data", "start needs data: the session to start"))
			return
		}
		reply(s.doors.Start(ctx, m.Data))
		return
	}
	handler, ok := commands[m.Type]
	if !ok {
		known := make([]string, 0, len(commands)+1)
		for _, name := range commandNames {
			known = append(known, name)
		}
		s.sendError(m.SessionID, m.ID, doors.Errorf(doors.KindValidation, "unknown message type %q; known: start, %s", m.Type, strings.Join(known, ", ")))
		return
	}
	id, err := uuid.Parse(m.SessionID)
	if err != nil {
		s.sendError(m.SessionID, m.ID, fieldError("sessionId", "sessionId must be a session id (a UUID)"))
		return
	}
	reply(handler(ctx, s, id, m))
}

func fieldError(field, msg string) *doors.Error {
	return &doors.Error{Kind: doors.KindValidation, Status: http.StatusUnprocessableEntity, Field: field, Message: msg}
}

// decode reads a message's data into v; no data is the zero value.
func decode(m ClientMessage, v any) error {
	if len(m.Data) == 0 || string(m.Data) == "null" {
		return nil
	}
	if err := json.Unmarshal(m.Data, v); err != nil {
		return fieldError("data", fmt.Sprintf("%s: data is not valid: %v", m.Type, err))
	}
	return nil
}

type command func(ctx context.Context, s *conn, id uuid.UUID, m ClientMessage) (doors.Session, error)

// commandNames lists the commands on a session, in the order the
// documentation gives them: the controls of the table come after input.
var commandNames = slices.Concat([]string{"subscribe", "unsubscribe", "input"}, controlNames(),
	[]string{"approve", "reject", "answer", "approve_plan", "reject_plan"})

// controlNames are the names of the controls people ask for.
func controlNames() []string {
	var names []string
	for _, c := range control.Offered() {
		names = append(names, c.Name)
	}
	return names
}

// Each control people ask for is the command of its name.
func init() {
	for _, c := range control.Offered() {
		commands[c.Name] = controlCommand(c)
	}
}

// controlCommand sends the control's request; with force set in its data,
// the forced request of a control that has one.
func controlCommand(c control.Control) command {
	if c.RequestForced == nil {
		return simple(c.Route.Path)
	}
	return func(ctx context.Context, s *conn, id uuid.UUID, m ClientMessage) (doors.Session, error) {
		var d struct {
			Force bool `json:"force"`
		}
		if err := decode(m, &d); err != nil {
			return doors.Session{}, err
		}
		if d.Force {
			return s.doors.Command(ctx, id, "force-"+c.Route.Path, nil)
		}
		return s.doors.Command(ctx, id, c.Route.Path, nil)
	}
}

var commands = map[string]command{
	"subscribe": func(ctx context.Context, s *conn, id uuid.UUID, m ClientMessage) (doors.Session, error) {
		var d struct {
			LastEventID uint64 `json:"lastEventId"`
		}
		if err := decode(m, &d); err != nil {
			return doors.Session{}, err
		}
		return s.doors.Attach(ctx, id, d.LastEventID)
	},
	"unsubscribe": func(_ context.Context, s *conn, id uuid.UUID, _ ClientMessage) (doors.Session, error) {
		if !s.doors.Detach(id) {
			return doors.Session{}, fieldError("sessionId", "session "+id.String()+" is not on this connection")
		}
		return doors.Session{ID: id}, nil
	},
	"input": func(ctx context.Context, s *conn, id uuid.UUID, m ClientMessage) (doors.Session, error) {
		var d struct {
			Content   string `json:"content"`
			Priority  string `json:"priority"`
			TimeoutMS int64  `json:"timeoutMs"`
		}
		if err := decode(m, &d); err != nil {
			return doors.Session{}, err
		}
		_, err := s.doors.Input(ctx, id, d.Content, d.Priority, time.Duration(d.TimeoutMS)*time.Millisecond, m.ID)
		if err != nil {
			return doors.Session{}, err
		}
		return doors.Session{ID: id, Status: "InputSent"}, nil
	},
	"approve": decide(true),
	"reject":  decide(false),
	"answer": func(ctx context.Context, s *conn, id uuid.UUID, m ClientMessage) (doors.Session, error) {
		var d struct {
			Answer string `json:"answer"`
		}
		if err := decode(m, &d); err != nil {
			return doors.Session{}, err
		}
		return s.doors.Command(ctx, id, "answer", d)
	},
	"approve_plan": simple("plan/approve"),
	"reject_plan": func(ctx context.Context, s *conn, id uuid.UUID, m ClientMessage) (doors.Session, error) {
		var d struct {
			Feedback string `json:"feedback"`
		}
		if err := decode(m, &d); err != nil {
			return doors.Session{}, err
		}
		return s.doors.Command(ctx, id, "plan/reject", d)
	},
}

func simple(path string) command {
	return func(ctx context.Context, s *conn, id uuid.UUID, _ ClientMessage) (doors.Session, error) {
		return s.doors.Command(ctx, id, path, nil)
	}
}

func decide(allow bool) command {
	return func(ctx context.Context, s *conn, id uuid.UUID, m ClientMessage) (doors.Session, error) {
		var d struct {
			RequestID string `json:"requestId"`
			Reason    string `json:"reason"`
		}
		if err := decode(m, &d); err != nil {
			return doors.Session{}, err
		}
		return s.doors.Decide(ctx, id, d.RequestID, allow, d.Reason)
	}
}

// Item writes a feed item as its message.
func (s *conn) Item(sessionID uuid.UUID, it doors.Item) error {
	typ, data := Translate(it)
	return s.send(ServerMessage{Type: typ, SessionID: sessionID.String(), Data: data, Timestamp: it.At.UnixMilli(), EventID: it.Seq})
}

// InputAck writes input_ack: the agent received the input.
func (s *conn) InputAck(sessionID uuid.UUID, in doors.Input, it doors.Item) error {
	return s.send(ServerMessage{Type: "input_ack", SessionID: sessionID.String(), Data: map[string]any{"messageId": in.MessageID},
		Timestamp: it.At.UnixMilli(), EventID: it.Seq, ReplyTo: in.Ref})
}

// InputTimeout writes input_timeout.
func (s *conn) InputTimeout(sessionID uuid.UUID, in doors.Input) {
	_ = s.send(ServerMessage{Type: "input_timeout", SessionID: sessionID.String(), Data: map[string]any{"messageId": in.MessageID}, ReplyTo: in.Ref})
}

// FeedFailed tells the client to subscribe again.
func (s *conn) FeedFailed(sessionID uuid.UUID, lastSeq uint64, err error) {
	slog.Warn("websocket: session feed stopped", "component", "websocket", "session_id", sessionID, "err", err)
	_ = s.send(ServerMessage{Type: "error", SessionID: sessionID.String(), Data: map[string]any{
		"kind": doors.KindInternal, "message": "the session's feed stopped: subscribe again with lastEventId", "lastEventId": lastSeq}})
}
