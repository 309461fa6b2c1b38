package api

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres/queries"
)

// messageNamespace derives an enqueued message's id from the id of the
// command that enqueues it, so a repeated request names the same message.
var messageNamespace = uuid.MustParse("2f8e4b6c-7a1d-4c3e-9b5f-0d2a4c6e8f1b")

// QueuedMessage is one message of a session's queue (SessionMessageDto).
type QueuedMessage struct {
	MessageID   uuid.UUID  `json:"messageId" format:"uuid" doc:"The message's id." example:"1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f"`
	Content     string     `json:"content" doc:"The message." example:"Also handle HTTP 429 with Retry-After."`
	Priority    string     `json:"priority" enum:"Immediate,Queued" doc:"Immediate steers the running turn; Queued waits for the turn to end." example:"Immediate"`
	Status      string     `json:"status" enum:"Pending,Delivered,Cancelled" doc:"Whether the message still waits, reached the agent, or was cancelled." example:"Pending"`
	Source      string     `json:"source" enum:"User,System,Webhook" doc:"Who enqueued it." example:"User"`
	Sequence    int64      `json:"sequence" doc:"Its place in the order of arrival." example:"4"`
	CreatedAt   time.Time  `json:"createdAt" doc:"When it was enqueued." example:"2026-03-01T09:20:00Z"`
	DeliveredAt *time.Time `json:"deliveredAt,omitempty" doc:"When the agent received it." example:"2026-03-01T09:20:01Z"`
	CancelledAt *time.Time `json:"cancelledAt,omitempty" doc:"When it was cancelled." example:"2026-03-01T09:21:00Z"`
}

// MessageQueue is a session's message queue.
type MessageQueue struct {
	SessionID uuid.UUID       `json:"sessionId" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	MessageID *uuid.UUID      `json:"messageId,omitempty" format:"uuid" doc:"The message this request enqueued (enqueue only)." example:"1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f"`
	Pending   []QueuedMessage `json:"pending" nullable:"false" doc:"The messages still to deliver, in delivery order: Immediate first, then Queued, each oldest first."`
	Messages  []QueuedMessage `json:"messages" nullable:"false" doc:"Every message, delivered and cancelled included, in order of arrival."`
}

// EnqueueRequest adds a message to a session's queue.
type EnqueueRequest struct {
	Content  string `json:"content" minLength:"1" maxLength:"4000" doc:"The message for the agent." example:"Also handle HTTP 429 with Retry-After."`
	Priority string `json:"priority,omitempty" enum:"Immediate,Queued" default:"Queued" doc:"Immediate steers the running turn as soon as possible; Queued waits for the turn to end (the default)." example:"Immediate"`
}

type enqueueMessageInput struct {
	ID   string `path:"id" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	Body EnqueueRequest
}

type queueMessageInput struct {
	ID        string `path:"id" format:"uuid" doc:"The session's id." example:"0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10"`
	MessageID string `path:"messageId" format:"uuid" doc:"The message's id." example:"1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f"`
}

type queueOutput struct {
	Body MessageQueue
}

type enqueueOutput struct {
	Body MessageQueue
}

// addQueueRoutes registers a session's message queue: enqueue (rate
// limited per session), view, cancel and promote.
func (s *Server) addQueueRoutes(api huma.API) {
	enqueue := humanOp("enqueue-message", http.MethodPost, "/api/agents/sessions/{id}/messages/queue", "Enqueue a message",
		"Adds a steering (Immediate) or follow-up (Queued) message to the session's queue. "+
			"Each session takes a limited number of messages per second: beyond it the answer is 429 with Retry-After.",
		"Message queue", append([]int{http.StatusTooManyRequests}, commandErrors...))
	enqueue.DefaultStatus = http.StatusCreated
	register(api, enqueue, s.enqueue)
	register(api, humanOp("get-message-queue", http.MethodGet, "/api/agents/sessions/{id}/messages/queue", "View a session's message queue",
		"The pending messages in delivery order, and every message of the session.", "Message queue", queryErrors), s.getQueue)
	register(api, humanOp("cancel-message", http.MethodDelete, "/api/agents/sessions/{id}/messages/queue/{messageId}", "Cancel a queued message",
		"Cancels a Pending message; a delivered or cancelled one cannot be.", "Message queue", commandErrors),
		func(ctx context.Context, in *queueMessageInput) (*queueOutput, error) {
			return s.messageCommand(ctx, in, command.CancelMessage)
		})
	register(api, humanOp("promote-message", http.MethodPatch, "/api/agents/sessions/{id}/messages/queue/{messageId}/promote", "Promote a queued message",
		"Makes a Pending Queued message Immediate, so it steers the running turn.", "Message queue", commandErrors),
		func(ctx context.Context, in *queueMessageInput) (*queueOutput, error) {
			return s.messageCommand(ctx, in, command.PromoteMessage)
		})
}

func (s *Server) enqueue(ctx context.Context, in *enqueueMessageInput) (*enqueueOutput, error) {
	owner, id, err := s.readOwned(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	// The owner is checked before the rate limit, so nobody can spend
	// another owner's allowance.
	if err := s.requireOwner(ctx, owner, id); err != nil {
		return nil, err
	}
	if err := s.QueueLimiter.Allow(id); err != nil {
		return nil, err
	}
	priority := domain.MessagePriority(in.Body.Priority)
	if priority == "" {
		priority = domain.PriorityQueued
	}
	cmdID := CommandID(ctx)
	msgID := uuid.NewSHA1(messageNamespace, cmdID[:])
	raw, err := s.send(ctx, domain.AggregateQueue, command.EnqueueMessage, id,
		command.EnqueueData{MessageID: msgID, Content: in.Body.Content, Priority: priority, Source: domain.MessageFromUser}, nil)
	if err != nil {
		return nil, err
	}
	v, err := s.queueAfter(ctx, raw)
	if err != nil {
		return nil, err
	}
	out := &enqueueOutput{Body: messageQueueOf(v)}
	out.Body.MessageID = &msgID
	return out, nil
}

// queueAfter returns the queue as a queue command's answer raw left it,
// with the messages that had left the queue by then read from the
// session's message history.
func (s *Server) queueAfter(ctx context.Context, raw json.RawMessage) (queries.QueueView, error) {
	state, err := decodeState[command.QueueState](raw)
	if err != nil {
		return queries.QueueView{}, err
	}
	if state.Messages != nil {
		return queries.QueueView{SessionID: state.SessionID, Pending: state.Pending, Messages: state.Messages}, nil
	}
	if nothingLeft(state) {
		// Every message enqueued so far is still pending: the history has
		// none of them, and the answer needs no read.
		messages := slices.Clone(state.Pending)
		slices.SortStableFunc(messages, func(a, b domain.SessionMessage) int { return cmp.Compare(a.Sequence, b.Sequence) })
		return queries.QueueView{SessionID: state.SessionID, Pending: nonNilMessages(state.Pending), Messages: nonNilMessages(messages)}, nil
	}
	if s.deps.Queries == nil {
		return queries.QueueView{}, unavailable("queries")
	}
	return s.deps.Queries.QueueAt(ctx, state.SessionID, state.Pending, state.NextSequence)
}

// nothingLeft reports whether no message has left the queue of state yet:
// its pending messages hold every sequence number below NextSequence
// (numbers are given from 0 up, one per message).
func nothingLeft(state command.QueueState) bool {
	if int64(len(state.Pending)) != state.NextSequence {
		return false
	}
	seen := make(map[int64]bool, len(state.Pending))
	for _, m := range state.Pending {
		if m.Sequence < 0 || m.Sequence >= state.NextSequence || seen[m.Sequence] {
			return false
		}
		seen[m.Sequence] = true
	}
	return true
}

func nonNilMessages(ms []domain.SessionMessage) []domain.SessionMessage {
	if ms == nil {
		return []domain.SessionMessage{}
	}
	return ms
}

// requireOwner answers 404 unless session id is the owner's. A session's
// owner never changes, so it is looked up once and remembered.
func (s *Server) requireOwner(ctx context.Context, owner, id uuid.UUID) error {
	got, ok := s.owners.get(id)
	if !ok {
		o, err := s.deps.Queries.Owner(ctx, id)
		if errors.Is(err, queries.ErrNotFound) {
			return &queries.NotFoundError{Entity: "session", ID: id.String()}
		}
		if err != nil {
			return err
		}
		got = o
		s.owners.put(id, got)
	}
	if got != owner.String() {
		return &queries.NotFoundError{Entity: "session", ID: id.String()}
	}
	return nil
}

// maxCachedOwners bounds the owners remembered; past it they are
// forgotten all at once and looked up again.
const maxCachedOwners = 100_000

// ownerCache remembers the owner of each session looked up. Only found
// sessions are remembered: a session created later must be found then.
type ownerCache struct {
	mu     sync.RWMutex
	owners map[uuid.UUID]string
}

func (c *ownerCache) get(id uuid.UUID) (string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	o, ok := c.owners[id]
	return o, ok
}

func (c *ownerCache) put(id uuid.UUID, owner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owners == nil || len(c.owners) >= maxCachedOwners {
		c.owners = map[uuid.UUID]string{}
	}
	c.owners[id] = owner
}

func (s *Server) getQueue(ctx context.Context, in *sessionIDInput) (*queueOutput, error) {
	owner, id, err := s.readOwned(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	v, err := s.deps.Queries.Queue(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return &queueOutput{Body: messageQueueOf(v)}, nil
}

func (s *Server) messageCommand(ctx context.Context, in *queueMessageInput, name string) (*queueOutput, error) {
	id, err := parseID("path.id", in.ID)
	if err != nil {
		return nil, err
	}
	msg, err := parseID("path.messageId", in.MessageID)
	if err != nil {
		return nil, err
	}
	raw, err := s.send(ctx, domain.AggregateQueue, name, id, command.MessageData{MessageID: msg},
		map[string]string{"messageId": "path.messageId"})
	if err != nil {
		return nil, err
	}
	v, err := s.queueAfter(ctx, raw)
	if err != nil {
		return nil, err
	}
	return &queueOutput{Body: messageQueueOf(v)}, nil
}

func messageQueueOf(v queries.QueueView) MessageQueue {
	out := MessageQueue{SessionID: v.SessionID, Pending: messagesOf(v.Pending), Messages: messagesOf(v.Messages)}
	return out
}

func messagesOf(ms []domain.SessionMessage) []QueuedMessage {
	out := make([]QueuedMessage, 0, len(ms))
	for _, m := range ms {
		out = append(out, QueuedMessage{MessageID: m.MessageID, Content: m.Content, Priority: string(m.Priority),
			Status: string(m.Status), Source: string(m.Source), Sequence: m.Sequence, CreatedAt: m.CreatedAt,
			DeliveredAt: m.DeliveredAt, CancelledAt: m.CancelledAt})
	}
	return out
}
