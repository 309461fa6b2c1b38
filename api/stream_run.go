package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/danielgtaylor/huma/v2/sse"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/feed"
)

// streamSpec says what one live stream reads.
type streamSpec struct {
	// subjects filter AGENTS_EVENTS.
	subjects []string
	// owner, when set, keeps only the envelopes of that owner.
	owner string
	// keep, when set, keeps only the envelopes it accepts.
	keep func(bus.Envelope) bool
	// position is where the client asked to start.
	position streamPosition
}

// streamItem is an event on its way from the bus to one client.
type streamItem struct {
	seq uint64
	env bus.Envelope
}

// runStream feeds one SSE client from AGENTS_EVENTS until the client goes
// away, falls behind, or the bus fails.
//
// The bus side is a JetStream ordered consumer: ephemeral, pulling at this
// client's pace (it never holds back the stream or other consumers), and
// recreated by the client library on any gap, so delivery is in stream
// order without holes. Its callback puts events into a buffer of
// Config.StreamBuffer, and at most that many more are pulled ahead, so
// memory per client is bounded. When the buffer stays full for
// Config.SlowClientTimeout the client is too slow: rather than hold events
// for it without bound or drop them silently, the stream sends `reconnect`
// with the last position the client received and ends. The client resumes
// from there with Last-Event-ID, so it misses nothing.
func (s *Server) runStream(ctx context.Context, spec streamSpec, send sse.Sender) {
	defer s.metrics.streamOpened()()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: spec.subjects,
		DeliverPolicy:  jetstream.DeliverNewPolicy,
	}
	// resume is the position before the first event this stream may send:
	// what the client holds. 0 means "nothing yet".
	var resume uint64
	switch {
	case spec.position.Set:
		resume = spec.position.After
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = resume + 1
	case spec.position.FromStart:
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	case !spec.position.Since.IsZero():
		since := spec.position.Since
		cfg.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		cfg.OptStartTime = &since
	}

	logger := slog.Default().With("component", "api", "stream", spec.subjects)
	cons, err := s.deps.JetStream.OrderedConsumer(ctx, bus.StreamEvents, cfg)
	if err != nil {
		logger.Error("api: open live stream", "err", err)
		_ = send(reconnectMessage(resume, "unavailable"))
		return
	}

	buf := make(chan streamItem, s.cfg.StreamBuffer)
	overflow := make(chan struct{})
	var (
		overflowOnce sync.Once
		overflowed   atomic.Bool
		// firstSeen is the sequence of the first event taken from the bus,
		// so a stream that overflows before it delivered anything still
		// knows where the client must resume.
		firstSeen atomic.Uint64
	)
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		if overflowed.Load() {
			return
		}
		md, err := msg.Metadata()
		if err != nil {
			logger.Error("api: live stream metadata", "err", err)
			return
		}
		var env bus.Envelope
		if err := json.Unmarshal(msg.Data(), &env); err != nil {
			logger.Warn("api: skip malformed event", "seq", md.Sequence.Stream, "err", err)
			return
		}
		if spec.owner != "" && env.OwnerID != spec.owner {
			return
		}
		if spec.keep != nil && !spec.keep(env) {
			return
		}
		firstSeen.CompareAndSwap(0, md.Sequence.Stream)
		it := streamItem{seq: md.Sequence.Stream, env: env}
		select {
		case buf <- it:
			return
		default:
		}
		// The buffer is full: a client catching up drains it soon; one that
		// is stuck does not.
		timer := time.NewTimer(s.cfg.SlowClientTimeout)
		defer timer.Stop()
		select {
		case buf <- it:
		case <-ctx.Done():
		case <-timer.C:
			overflowed.Store(true)
			overflowOnce.Do(func() { close(overflow) })
		}
	}, jetstream.PullMaxMessages(s.cfg.StreamBuffer), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		logger.Debug("api: live stream consumer", "err", err)
	}))
	if err != nil {
		logger.Error("api: consume live stream", "err", err)
		_ = send(reconnectMessage(resume, "unavailable"))
		return
	}
	defer cc.Stop()

	// The first ping flushes the response headers: the client knows the
	// stream is open, and every event published from now on will come.
	if err := send.Data(StreamPing{Time: time.Now().UTC()}); err != nil {
		return
	}
	heartbeat := time.NewTicker(s.cfg.HeartbeatInterval)
	defer heartbeat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-cc.Closed():
			_ = send(reconnectMessage(resumePoint(resume, firstSeen.Load()), "unavailable"))
			return
		case <-overflow:
			_ = send(reconnectMessage(resumePoint(resume, firstSeen.Load()), "slow_client"))
			return
		case it := <-buf:
			if overflowed.Load() {
				// What is still buffered comes again after the reconnect.
				_ = send(reconnectMessage(resumePoint(resume, firstSeen.Load()), "slow_client"))
				return
			}
			if err := send(sse.Message{ID: int(it.seq), Data: streamData(it.env)}); err != nil {
				return
			}
			resume = it.seq
			heartbeat.Reset(s.cfg.HeartbeatInterval)
		case <-heartbeat.C:
			if err := send.Data(StreamPing{Time: time.Now().UTC()}); err != nil {
				return
			}
		}
	}
}

// feedKinds makes the typed payload of each feed item kind.
var feedKinds = map[string]func() any{
	feed.KindAssistantText: func() any { return &feed.LiveAssistantText{} },
	feed.KindToolCall:      func() any { return &feed.LiveToolCall{} },
	feed.KindToolResult:    func() any { return &feed.LiveToolResult{} },
	feed.KindActivity:      func() any { return &feed.LiveActivity{} },
	feed.KindTextDelta:     func() any { return &feed.LiveTextDelta{} },
}

// streamData is the SSE payload of an envelope: a feed item as its kind's
// type, which names the SSE event, and a domain event as StreamEvent.
func streamData(env bus.Envelope) any {
	if env.Aggregate == feed.Aggregate {
		if mk, ok := feedKinds[env.Type]; ok {
			v := mk()
			if json.Unmarshal(env.Data, v) == nil {
				return v
			}
		}
	}
	ev := StreamEvent{
		Type:        env.Type,
		Aggregate:   env.Aggregate,
		AggregateID: env.AggregateID,
		Version:     env.Version,
		OccurredAt:  env.OccurredAt,
		Data:        env.Data,
	}
	if len(ev.Data) == 0 {
		ev.Data = json.RawMessage("{}")
	}
	return ev
}

// resumePoint is the position a client must resume from: the last event it
// received, or, when it received none, the one before the first event the
// stream took from the bus.
func resumePoint(delivered, firstSeen uint64) uint64 {
	if delivered > 0 || firstSeen == 0 {
		return delivered
	}
	return firstSeen - 1
}

// reconnectMessage carries the resume position both in the payload and as
// the SSE id, so a browser's EventSource, which reconnects by itself,
// sends it back as Last-Event-ID.
func reconnectMessage(resume uint64, reason string) sse.Message {
	msg := sse.Message{Data: StreamReconnect{Reason: reason}}
	if resume > 0 {
		msg.ID = int(resume)
		msg.Data = StreamReconnect{LastEventID: strconv.FormatUint(resume, 10), Reason: reason}
	}
	return msg
}
