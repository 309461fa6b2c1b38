package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// Headers of the JetStream atomic batch publish protocol (nats-server 2.12+,
// streams with allow_atomic).
const (
	headerBatchID     = "Nats-Batch-Id"
	headerBatchSeq    = "Nats-Batch-Sequence"
	headerBatchCommit = "Nats-Batch-Commit"
)

// errCodeBatchDuplicate is the server's answer to an atomic batch holding a
// message whose Nats-Msg-Id is already stored: the whole batch is refused.
const errCodeBatchDuplicate jetstream.ErrorCode = 10201

// publisher stores runs of events on JetStream, in order, and never leaves
// a later event of a run stored after an earlier one that is not: that is
// what lets the relay find where a session stopped from its last stored
// event alone.
type publisher struct {
	js       jetstream.JetStream
	timeout  time.Duration
	batchMin int

	mu   sync.Mutex
	lost chan struct{} // closed when the connection drops
}

// watch makes publishes in flight fail as soon as the connection drops: an
// answer sent to a dropped connection never arrives, and waiting for the
// timeout would only delay the retry. It returns a function that stops
// watching.
func (p *publisher) watch(nc *nats.Conn) (stop func()) {
	p.mu.Lock()
	p.lost = make(chan struct{})
	p.mu.Unlock()
	ch := nc.StatusChanged(nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-ch:
				p.mu.Lock()
				close(p.lost)
				p.lost = make(chan struct{})
				p.mu.Unlock()
			}
		}
	}()
	return func() {
		nc.RemoveStatusListener(ch)
		close(done)
	}
}

// bound returns ctx limited by the publish timeout and by the connection
// staying up.
func (p *publisher) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	p.mu.Lock()
	lost := p.lost
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	if lost != nil {
		go func() {
			select {
			case <-lost:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	return ctx, cancel
}

// publish stores msgs and returns nil once every one of them is stored (or
// was already). From batchMin messages on they go out as one atomic batch:
// all are stored, with a single fsync for the messages, or none. Fewer are
// pipelined one by one (see publishEach): a batch has a fixed cost of
// several milliseconds (the server stages it in a store of its own), which
// a trickle of events would pay for every event or two. A batch refused
// because it holds an event stored before (a resend after a crash) is sent
// again one event at a time, so the duplicates are dropped by their
// Nats-Msg-Id.
func (p *publisher) publish(ctx context.Context, msgs []*nats.Msg) error {
	if len(msgs) < p.batchMin {
		return p.publishEach(ctx, msgs)
	}
	err := p.publishBatch(ctx, msgs)
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeBatchDuplicate {
		return p.publishEach(ctx, msgs)
	}
	return err
}

// publishEach sends msgs all at once, then reads their acks in order. On
// one connection the server receives them in order, so when the
// connection drops, what it stored is a prefix. A message the server
// refuses while later ones are stored would leave a gap: from the first
// refusal on, the messages are sent again one at a time, each waiting for
// its ack, and those already stored are dropped as duplicates. That stops
// at the first failure, so it never leaves a gap either.
func (p *publisher) publishEach(ctx context.Context, msgs []*nats.Msg) error {
	ctx, cancel := p.bound(ctx)
	defer cancel()
	acks := make([]jetstream.PubAckFuture, 0, len(msgs))
	for _, m := range msgs {
		f, err := p.js.PublishMsgAsync(m)
		if err != nil {
			break
		}
		acks = append(acks, f)
	}
	for i, f := range acks {
		select {
		case <-f.Ok():
		case <-f.Err():
			return p.publishInTurn(ctx, msgs[i:])
		case <-ctx.Done():
			return fmt.Errorf("publish %s: %w", f.Msg().Subject, ctx.Err())
		}
	}
	return p.publishInTurn(ctx, msgs[len(acks):])
}

// publishInTurn publishes msgs one at a time, each after the previous one's ack.
func (p *publisher) publishInTurn(ctx context.Context, msgs []*nats.Msg) error {
	for _, m := range msgs {
		if _, err := p.js.PublishMsg(ctx, m); err != nil {
			return fmt.Errorf("publish %s: %w", m.Subject, err)
		}
	}
	return nil
}

// batchAck is the server's answer to a batch commit.
type batchAck struct {
	Error  *jetstream.APIError `json:"error,omitempty"`
	Stream string              `json:"stream"`
	Seq    uint64              `json:"seq"`
	Batch  string              `json:"batch"`
	Count  int                 `json:"count"`
}

// publishBatch sends msgs as one atomic batch: plain publishes the server
// stages, then a commit request. Messages on one connection arrive in
// order, and a lost one shows as a gap the server refuses at commit.
func (p *publisher) publishBatch(ctx context.Context, msgs []*nats.Msg) error {
	nc := p.js.Conn()
	id := nuid.Next()
	last := len(msgs) - 1
	defer func() {
		for _, m := range msgs {
			delete(m.Header, headerBatchID)
			delete(m.Header, headerBatchSeq)
			delete(m.Header, headerBatchCommit)
		}
	}()
	for i, m := range msgs[:last] {
		m.Header[headerBatchID] = []string{id}
		m.Header[headerBatchSeq] = []string{strconv.Itoa(i + 1)}
		if err := nc.PublishMsg(m); err != nil {
			return fmt.Errorf("publish batch: %w", err)
		}
	}
	m := msgs[last]
	m.Header[headerBatchID] = []string{id}
	m.Header[headerBatchSeq] = []string{strconv.Itoa(last + 1)}
	m.Header[headerBatchCommit] = []string{"1"}
	pctx, cancel := p.bound(ctx)
	defer cancel()
	resp, err := nc.RequestMsgWithContext(pctx, m)
	if err != nil {
		return fmt.Errorf("publish batch: %w", err)
	}
	var ack batchAck
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return fmt.Errorf("publish batch: invalid ack: %w", err)
	}
	if ack.Error != nil {
		return ack.Error
	}
	if ack.Batch != id || ack.Count != len(msgs) || ack.Stream == "" {
		return fmt.Errorf("publish batch: ack for batch %q of %d, sent %q of %d", ack.Batch, ack.Count, id, len(msgs))
	}
	return nil
}
