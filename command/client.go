package command

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/bus"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ResultStore looks up the stored result of a command that was handled
// already. A client needs it to answer a repeated command, because
// JetStream drops the repeat and the worker never sees it.
type ResultStore interface {
	// Result returns the command's result and whether it exists yet.
	Result(ctx context.Context, commandID uuid.UUID) (Result, bool, error)
}

// Client sends commands and, when asked, waits for their results. It is
// safe for concurrent use.
type Client struct {
	js      jetstream.JetStream
	results ResultStore
	inbox   string
	sub     *nats.Subscription

	mu      sync.Mutex
	waiting map[uuid.UUID]chan Result
}

// NewClient subscribes to a private inbox for results. results may be nil
// when no caller repeats command ids.
func NewClient(nc *nats.Conn, js jetstream.JetStream, results ResultStore) (*Client, error) {
	c := &Client{js: js, results: results, inbox: nc.NewRespInbox(), waiting: map[uuid.UUID]chan Result{}}
	sub, err := nc.Subscribe(c.inbox+".*", c.deliver)
	if err != nil {
		return nil, fmt.Errorf("subscribe to results: %w", err)
	}
	c.sub = sub
	return c, nil
}

// Close stops listening for results.
func (c *Client) Close() error { return c.sub.Unsubscribe() }

func (c *Client) deliver(m *nats.Msg) {
	var r Result
	if err := jsonv1.Unmarshal(m.Data, &r); err != nil {
		return
	}
	c.mu.Lock()
	ch := c.waiting[r.CommandID]
	c.mu.Unlock()
	if ch != nil {
		select {
		case ch <- r:
		default:
		}
	}
}

// Send publishes cmd without waiting for its result. Once Send returns,
// the command is stored in AGENTS_COMMANDS and will be handled.
func (c *Client) Send(ctx context.Context, cmd Command) error {
	_, err := c.publish(ctx, cmd, "")
	return err
}

// Do publishes cmd and waits for its result until ctx ends. A refused
// command is a Result with Error set, not an error; the error is for
// transport failures and timeouts. After a timeout the command is still
// stored and will be handled.
func (c *Client) Do(ctx context.Context, cmd Command) (Result, error) {
	ch := make(chan Result, 1)
	c.mu.Lock()
	c.waiting[cmd.ID] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiting, cmd.ID)
		c.mu.Unlock()
	}()

	start := time.Now()
	ack, err := c.publish(ctx, cmd, c.inbox+"."+cmd.ID.String())
	if err != nil {
		return Result{}, err
	}
	if ack.Duplicate {
		return c.awaitStored(ctx, cmd.ID, ch)
	}
	select {
	case r := <-ch:
		outcome := "applied"
		if r.Error != nil {
			outcome = "refused"
		}
		Latency.WithLabelValues(cmd.Name, outcome).Observe(time.Since(start).Seconds())
		observeSteering(cmd, r)
		return r, nil
	case <-ctx.Done():
		Latency.WithLabelValues(cmd.Name, "timeout").Observe(time.Since(start).Seconds())
		return Result{}, fmt.Errorf("waiting for the result of %s %s: %w", cmd.Name, cmd.ID, ctx.Err())
	}
}

// awaitStored waits for the first handling of a repeated command.
func (c *Client) awaitStored(ctx context.Context, id uuid.UUID, ch chan Result) (Result, error) {
	if c.results == nil {
		return Result{}, fmt.Errorf("command %s was sent before and no result store is configured", id)
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		r, ok, err := c.results.Result(ctx, id)
		if err != nil {
			return Result{}, err
		}
		if ok {
			return r, nil
		}
		select {
		case r := <-ch:
			return r, nil
		case <-tick.C:
		case <-ctx.Done():
			return Result{}, fmt.Errorf("waiting for the result of repeated command %s: %w", id, ctx.Err())
		}
	}
}

func (c *Client) publish(ctx context.Context, cmd Command, replyTo string) (*jetstream.PubAck, error) {
	body, err := json.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	msg := &nats.Msg{Subject: cmd.Subject(), Data: body, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, cmd.ID.String())
	msg.Header.Set("Agents-Type", cmd.Name)
	if replyTo != "" {
		msg.Header.Set(ReplyHeader, replyTo)
	}
	ack, err := bus.PublishMsg(ctx, c.js, msg)
	if err != nil {
		return nil, fmt.Errorf("send %s: %w", cmd.Subject(), err)
	}
	return ack, nil
}
