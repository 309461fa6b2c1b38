package doors

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/agentbus/agentbus/domain"
)

// Config bounds what one client connection may do.
type Config struct {
	// MaxSessions is how many sessions one connection carries at once;
	// default 10.
	MaxSessions int
	// InputAckTimeout is how long an input waits for its delivery to the
	// agent before the client is told it timed out; default 30s. A client
	// may give its own per input.
	InputAckTimeout time.Duration
	// Rate is how many messages per second a connection may send
	// (sustained), Burst how many at once; default 20 and 40.
	Rate  float64
	Burst int
	// MaxMessageBytes is the largest message a client may send; larger
	// ones are refused with an error; default 64 KiB.
	MaxMessageBytes int
}

// Defaults of Config.
const (
	DefaultMaxSessions     = 10
	DefaultInputAckTimeout = 30 * time.Second
	DefaultRate            = 20
	DefaultBurst           = 40
	DefaultMaxMessageBytes = 64 << 10
)

// WithDefaults returns c with its unset fields at their defaults.
func (c Config) WithDefaults() Config {
	if c.MaxSessions <= 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.InputAckTimeout <= 0 {
		c.InputAckTimeout = DefaultInputAckTimeout
	}
	if c.Rate <= 0 {
		c.Rate = DefaultRate
	}
	if c.Burst <= 0 {
		c.Burst = DefaultBurst
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	return c
}

// Input is an input waiting for its delivery to the agent.
type Input struct {
	MessageID uuid.UUID
	// Ref is the client's reference of the message that sent it.
	Ref string
}

// Sink takes what a connection's sessions produce and writes it to the
// client. Its methods are called from one goroutine per session.
type Sink interface {
	// Item is the next item of the session's feed.
	Item(sessionID uuid.UUID, it Item) error
	// InputAck is the item that says the agent received an input.
	InputAck(sessionID uuid.UUID, in Input, it Item) error
	// InputTimeout says an input was not delivered in time; it may still be.
	InputTimeout(sessionID uuid.UUID, in Input)
	// FeedFailed says the session's feed stopped: the client subscribes
	// again from the last id it holds, lastSeq.
	FeedFailed(sessionID uuid.UUID, lastSeq uint64, err error)
}

// Conn is one client connection of a door: the sessions it carries, each
// with its feed followed, the inputs it waits to see delivered, and its
// rate limit. Commands go to the API as its caller.
type Conn struct {
	cfg     Config
	api     API
	feed    Feed
	sink    Sink
	limiter *rate.Limiter
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu       sync.Mutex
	sessions map[uuid.UUID]*following
	reserved int
	inputs   map[uuid.UUID]*pendingInput
	// delivered remembers deliveries of this connection's sessions, for an
	// input whose delivery comes before the API's answer to it.
	delivered map[uuid.UUID]Item
}

type following struct {
	cancel context.CancelFunc
	done   chan struct{}
}

type pendingInput struct {
	session uuid.UUID
	in      Input
	timer   *time.Timer
}

// NewConn starts a connection; Close ends it.
func NewConn(ctx context.Context, cfg Config, api API, feed Feed, sink Sink) *Conn {
	cfg = cfg.WithDefaults()
	ctx, cancel := context.WithCancel(ctx)
	return &Conn{cfg: cfg, api: api, feed: feed, sink: sink, ctx: ctx, cancel: cancel,
		limiter:  rate.NewLimiter(rate.Limit(cfg.Rate), cfg.Burst),
		sessions: map[uuid.UUID]*following{}, inputs: map[uuid.UUID]*pendingInput{}, delivered: map[uuid.UUID]Item{}}
}

// Config returns the connection's limits.
func (c *Conn) Config() Config { return c.cfg }

// Allow spends one message of the connection's rate; over it, the error
// is rate_limited with when to try again.
func (c *Conn) Allow() *Error {
	r := c.limiter.Reserve()
	d := r.Delay()
	if d == 0 {
		return nil
	}
	r.Cancel()
	return &Error{Kind: KindRateLimited, Status: http.StatusTooManyRequests,
		Message:           "too many messages on this connection; wait before sending more",
		RetryAfterSeconds: int(math.Ceil(d.Seconds()))}
}

// Session is what a door tells of a session after a command.
type Session struct {
	ID     uuid.UUID `json:"id"`
	Status string    `json:"status"`
	Name   string    `json:"name,omitempty"`
}

// Start starts a session with body (the API's start-session request)
// and follows its feed from its beginning, so nothing it does is missed.
func (c *Conn) Start(ctx context.Context, body any) (Session, error) {
	return c.StartBound(ctx, body, nil)
}

// StartBound is Start that calls bind, when not nil, with the session's id
// before its feed is followed.
func (c *Conn) StartBound(ctx context.Context, body any, bind func(uuid.UUID)) (Session, error) {
	if err := c.reserve(); err != nil {
		return Session{}, err
	}
	var out struct {
		Session Session `json:"session"`
	}
	err := Do(ctx, c.api, http.MethodPost, "/api/agents/sessions", body, &out)
	c.mu.Lock()
	c.reserved--
	c.mu.Unlock()
	if err != nil {
		return Session{}, err
	}
	if bind != nil {
		bind(out.Session.ID)
	}
	return out.Session, c.follow(out.Session.ID, 0)
}

// Attach follows the feed of an existing session of the caller after
// position after (0: from its beginning) and returns its current state;
// another owner's session is not_found, as on the API.
func (c *Conn) Attach(ctx context.Context, id uuid.UUID, after uint64) (Session, error) {
	if c.Has(id) {
		return Session{}, Errorf(KindConflict, "session %s is already on this connection", id)
	}
	if err := c.reserve(); err != nil {
		return Session{}, err
	}
	var s Session
	err := Do(ctx, c.api, http.MethodGet, "/api/agents/sessions/"+id.String(), nil, &s)
	c.mu.Lock()
	c.reserved--
	c.mu.Unlock()
	if err != nil {
		return Session{}, err
	}
	return s, c.follow(id, after)
}

// reserve takes a place for one more session, or refuses when the
// connection carries its maximum.
func (c *Conn) reserve() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sessions)+c.reserved >= c.cfg.MaxSessions {
		return &Error{Kind: KindConflict, Status: http.StatusConflict,
			Message: "this connection already carries its maximum of sessions; unsubscribe from one first"}
	}
	c.reserved++
	return nil
}

func (c *Conn) follow(id uuid.UUID, after uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx.Err() != nil {
		return c.ctx.Err()
	}
	if _, ok := c.sessions[id]; ok {
		return Errorf(KindConflict, "session %s is already on this connection", id)
	}
	ctx, cancel := context.WithCancel(c.ctx)
	f := &following{cancel: cancel, done: make(chan struct{})}
	c.sessions[id] = f
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer close(f.done)
		last := after
		err := c.feed.Follow(ctx, id, after, func(it Item) error {
			last = it.Seq
			return c.deliver(id, it)
		})
		if ctx.Err() == nil {
			c.sink.FeedFailed(id, last, err)
			c.mu.Lock()
			if c.sessions[id] == f {
				delete(c.sessions, id)
			}
			c.mu.Unlock()
		}
	}()
	return nil
}

// deliver hands an item to the sink, as the ack of an input it waits for
// when it is one.
func (c *Conn) deliver(id uuid.UUID, it Item) error {
	if it.Event == EventDomain && it.Type == (domain.MessageDeliveredEvent{}).EventType() {
		var d struct {
			MessageID uuid.UUID `json:"messageId"`
		}
		if json.Unmarshal(it.Data, &d) == nil {
			c.mu.Lock()
			p, ok := c.inputs[d.MessageID]
			if ok {
				p.timer.Stop()
				delete(c.inputs, d.MessageID)
			} else {
				if len(c.delivered) > 1024 {
					clear(c.delivered)
				}
				c.delivered[d.MessageID] = it
			}
			c.mu.Unlock()
			if ok {
				return c.sink.InputAck(id, p.in, it)
			}
		}
	}
	return c.sink.Item(id, it)
}

// Has tells whether the connection carries the session.
func (c *Conn) Has(id uuid.UUID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.sessions[id]
	return ok
}

// Sessions returns the sessions the connection carries.
func (c *Conn) Sessions() []uuid.UUID {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]uuid.UUID, 0, len(c.sessions))
	for id := range c.sessions {
		out = append(out, id)
	}
	return out
}

// Detach stops following the session; it reports whether it was followed.
func (c *Conn) Detach(id uuid.UUID) bool {
	c.mu.Lock()
	f, ok := c.sessions[id]
	delete(c.sessions, id)
	c.mu.Unlock()
	if ok {
		f.cancel()
		<-f.done
	}
	return ok
}

// requireSession refuses a command on a session the connection does not
// carry: its answers would have nowhere to go.
func (c *Conn) requireSession(id uuid.UUID) error {
	if !c.Has(id) {
		return &Error{Kind: KindValidation, Status: http.StatusUnprocessableEntity, Field: "sessionId",
			Message: "session " + id.String() + " is not on this connection: start it or subscribe to it first"}
	}
	return nil
}

// Input enqueues a message for the agent (priority Immediate or Queued)
// and waits, up to timeout (0: the connection's), for the agent to
// receive it: the sink then gets InputAck, or InputTimeout.
func (c *Conn) Input(ctx context.Context, id uuid.UUID, content, priority string, timeout time.Duration, ref string) (uuid.UUID, error) {
	if err := c.requireSession(id); err != nil {
		return uuid.Nil, err
	}
	body := map[string]any{"content": content}
	if priority != "" {
		body["priority"] = priority
	}
	var out struct {
		MessageID uuid.UUID `json:"messageId"`
	}
	if err := Do(ctx, c.api, http.MethodPost, "/api/agents/sessions/"+id.String()+"/messages/queue", body, &out); err != nil {
		return uuid.Nil, err
	}
	if timeout <= 0 {
		timeout = c.cfg.InputAckTimeout
	}
	in := Input{MessageID: out.MessageID, Ref: ref}
	c.mu.Lock()
	if it, ok := c.delivered[out.MessageID]; ok {
		delete(c.delivered, out.MessageID)
		c.mu.Unlock()
		return out.MessageID, c.sink.InputAck(id, in, it)
	}
	p := &pendingInput{session: id, in: in}
	p.timer = time.AfterFunc(timeout, func() {
		c.mu.Lock()
		_, waiting := c.inputs[in.MessageID]
		delete(c.inputs, in.MessageID)
		c.mu.Unlock()
		if waiting && c.ctx.Err() == nil {
			c.sink.InputTimeout(id, in)
		}
	})
	c.inputs[out.MessageID] = p
	c.mu.Unlock()
	return out.MessageID, nil
}

// Command sends one of the session's commands, POST
// /api/agents/sessions/{id}/{path}, and returns the session's new state.
func (c *Conn) Command(ctx context.Context, id uuid.UUID, path string, body any) (Session, error) {
	if err := c.requireSession(id); err != nil {
		return Session{}, err
	}
	var s Session
	err := Do(ctx, c.api, http.MethodPost, "/api/agents/sessions/"+id.String()+"/"+path, body, &s)
	return s, err
}

// Permission is a tool use waiting for the owner's decision.
type Permission struct {
	RequestID string `json:"requestId"`
	ToolName  string `json:"toolName"`
}

// Permissions returns the session's pending tool permission requests,
// oldest first.
func (c *Conn) Permissions(ctx context.Context, id uuid.UUID) ([]Permission, error) {
	var out struct {
		Items []Permission `json:"items"`
	}
	err := Do(ctx, c.api, http.MethodGet, "/api/agents/sessions/"+id.String()+"/permissions", nil, &out)
	return out.Items, err
}

// Decide allows or denies a pending tool use; an empty requestID decides
// the oldest one.
func (c *Conn) Decide(ctx context.Context, id uuid.UUID, requestID string, allow bool, message string) (Session, error) {
	if err := c.requireSession(id); err != nil {
		return Session{}, err
	}
	if requestID == "" {
		pending, err := c.Permissions(ctx, id)
		if err != nil {
			return Session{}, err
		}
		if len(pending) == 0 {
			return Session{}, &Error{Kind: KindConflict, Status: http.StatusConflict, Message: "session " + id.String() + " has no pending tool permission request"}
		}
		requestID = pending[0].RequestID
	}
	verb := "deny"
	if allow {
		verb = "allow"
	}
	var body any
	if message != "" {
		body = map[string]string{"message": message}
	}
	return c.Command(ctx, id, "permissions/"+requestID+"/"+verb, body)
}

// DenyPending denies every pending tool permission request of the
// connection's sessions with message: a client that goes away cannot
// answer them.
func (c *Conn) DenyPending(ctx context.Context, message string) {
	for _, id := range c.Sessions() {
		pending, err := c.Permissions(ctx, id)
		if err != nil {
			continue
		}
		for _, p := range pending {
			var s Session
			err := Do(ctx, c.api, http.MethodPost, "/api/agents/sessions/"+id.String()+"/permissions/"+p.RequestID+"/deny",
				map[string]string{"message": message}, &s)
			var e *Error
			if err != nil && !errors.As(err, &e) {
				return
			}
		}
	}
}

// Close stops following every session and waiting for every input.
func (c *Conn) Close() {
	c.cancel()
	c.mu.Lock()
	for _, p := range c.inputs {
		p.timer.Stop()
	}
	clear(c.inputs)
	c.mu.Unlock()
	c.wg.Wait()
}
