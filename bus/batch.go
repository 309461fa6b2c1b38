package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// Headers of the JetStream atomic batch publish protocol (nats-server 2.12+,
// on streams with allow_atomic).
//
// Runs go out as atomic batches, not as the server's non-atomic fast
// batches (allow_batched, nats-server 2.14+), because only the atomic
// commit shares one fsync among its messages: on a single node the server
// stores every message of a fast batch as a single publish, each fsynced
// before the next, so a fast batch is no faster than pipelined publishes
// (BenchmarkPublish, fast-N beside async and batch-N). The atomic batch pays
// instead a fixed cost for the store it stages the batch in.
const (
	headerBatchID     = "Nats-Batch-Id"
	headerBatchSeq    = "Nats-Batch-Sequence"
	headerBatchCommit = "Nats-Batch-Commit"
)

// batchAck is the server's answer to a batch message: empty for a staged
// message, the stream position of the last message and the batch size for
// the commit, or an error.
type batchAck struct {
	Error  *jetstream.APIError `json:"error,omitempty"`
	Stream string              `json:"stream"`
	Seq    uint64              `json:"seq"`
	Batch  string              `json:"batch"`
	Count  int                 `json:"count"`
}

// errBadBatchAck is returned when the commit's answer does not describe the
// batch that was sent.
var errBadBatchAck = errors.New("bus: invalid batch ack")

// publishBatch publishes run, all for one stream, as one atomic batch. The
// first message is a request, so a stream that refuses batches answers
// before the rest is sent; the middle ones are plain publishes the server
// stages; the last one carries the commit and waits for the ack. Messages on
// one connection arrive in order, and a lost one shows as a gap the server
// refuses at commit.
func (p *Publisher) publishBatch(ctx context.Context, run []*nats.Msg) error {
	_, err := p.publishAtomic(ctx, run)
	return err
}

// PublishBatch publishes msgs, all for one stream, as one atomic batch and
// returns the commit's ack: the stream and the sequence of the last
// message. The server stores a batch's messages one after the other, so the
// first one has Sequence-len(msgs)+1. A *jetstream.APIError means the server
// refused the batch and stored none of it, e.g. a message's
// Nats-Expected-Last-Subject-Sequence did not match.
func (p *Publisher) PublishBatch(ctx context.Context, msgs []*nats.Msg) (*jetstream.PubAck, error) {
	ctx, cancel := p.bound(ctx)
	defer cancel()
	ack, err := p.publishAtomic(ctx, msgs)
	if err != nil {
		return nil, err
	}
	return &jetstream.PubAck{Stream: ack.Stream, Sequence: ack.Seq}, nil
}

func (p *Publisher) publishAtomic(ctx context.Context, run []*nats.Msg) (batchAck, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return batchAck{}, ctx.Err()
	}
	defer func() { <-p.slots }()

	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	nc := p.js.Conn()
	id := nuid.Next()
	last := len(run) - 1
	for i, src := range run {
		m := &nats.Msg{Subject: src.Subject, Header: maps.Clone(src.Header), Data: src.Data}
		if m.Header == nil {
			m.Header = nats.Header{}
		}
		m.Header.Set(headerBatchID, id)
		m.Header.Set(headerBatchSeq, strconv.Itoa(i+1))
		m.Header.Del(headerBatchCommit)
		switch i {
		case last:
			m.Header.Set(headerBatchCommit, "1")
			ack, err := batchRequest(ctx, nc, m)
			if err != nil {
				return ack, err
			}
			if ack.Batch != id || ack.Count != len(run) || ack.Stream == "" {
				return ack, fmt.Errorf("%w: batch %q count %d, sent %q count %d", errBadBatchAck, ack.Batch, ack.Count, id, len(run))
			}
			return ack, nil
		case 0:
			if _, err := batchRequest(ctx, nc, m); err != nil {
				return batchAck{}, err
			}
		default:
			if err := nc.PublishMsg(m); err != nil {
				return batchAck{}, fmt.Errorf("bus: batch publish %s: %w", m.Subject, err)
			}
		}
	}
	return batchAck{}, nil
}

// batchRequest sends m and decodes the answer; a refusal is returned as the
// server's *jetstream.APIError.
func batchRequest(ctx context.Context, nc *nats.Conn, m *nats.Msg) (batchAck, error) {
	resp, err := nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		return batchAck{}, fmt.Errorf("bus: batch publish %s: %w", m.Subject, err)
	}
	var ack batchAck
	if len(resp.Data) == 0 {
		return ack, nil
	}
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return ack, fmt.Errorf("%w: %v", errBadBatchAck, err)
	}
	if ack.Error != nil {
		return ack, ack.Error
	}
	return ack, nil
}
