package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2/sse"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/feed"
)

// streamSpec says what one live stream reads.
type streamSpec struct {
	// subjects filter AGENTS_EVENTS.
	subjects []string
	// session, when set, is the session whose stream this is; otherwise
	// the stream carries all of owner's sessions.
	session string
	// owner, when set, keeps only the envelopes of that owner.
	owner string
	// keep, when set, keeps only the envelopes it accepts.
	keep func(bus.Envelope) bool
	// position is where the client asked to start.
	position streamPosition
	// waiting, when set, tells the client what the session waits for
	// once the stream is live, and whenever that changes.
	waiting *waitingFeed
}

// streamItem is an event on its way from the bus to one client.
type streamItem struct {
	seq uint64
	env bus.Envelope
}

// runStream feeds one SSE client from AGENTS_EVENTS until the client goes
// away, falls behind, or the bus fails.
//
// Live events come from the API's fan-out (see fanout), which reads
// AGENTS_EVENTS once for all clients and puts each client's events into a
// buffer of Config.StreamBuffer, so memory per client is bounded and no
// client holds back the others. What the client asks for from before the
// stream opened (Last-Event-ID, since) is read from the stream with an
// ordered consumer of the client's own, up to the position where the
// fan-out took over: delivery is in stream order without gap or repeat.
//
// When a client's buffer overflows, the fan-out drops it; the stream sends
// what the buffer holds and, if that took less than
// Config.SlowClientTimeout, catches up from the stream and joins the
// fan-out again. A client slower than that gets `reconnect` with the last
// position it received, and the stream ends: rather than hold events for
// it without bound or drop them silently. The client resumes from there
// with Last-Event-ID, so it misses nothing.
func (s *Server) runStream(ctx context.Context, spec streamSpec, send sse.Sender) {
	defer s.metrics.streamOpened()()
	ls := &liveStream{s: s, spec: spec, send: send, from: spec.position,
		heartbeat: time.NewTicker(s.cfg.HeartbeatInterval),
		log:       slog.Default().With("component", "api", "stream", spec.subjects)}
	defer ls.heartbeat.Stop()
	if spec.position.Set {
		ls.sent = spec.position.After
	}
	for {
		sub := newSubscriber(spec.session, spec.owner, s.cfg.StreamBuffer)
		pos, err := s.fanout.subscribe(ctx, sub)
		if err != nil {
			ls.log.Error("api: open live stream", "err", err)
			_ = send(reconnectMessage(ls.resume(), "unavailable"))
			return
		}
		again := ls.follow(ctx, sub, pos)
		s.fanout.unsubscribe(sub)
		if !again {
			return
		}
	}
}

// liveStream is the state of one client's stream.
type liveStream struct {
	s    *Server
	spec streamSpec
	send sse.Sender
	log  *slog.Logger
	// from is what the client holds: its position until the stream has
	// read past it, then the last event read (sent or not).
	from streamPosition
	// sent is the last event sent, and firstSeen the first event taken
	// from the bus, so that a stream that ends before it delivered
	// anything still knows where the client must resume.
	sent, firstSeen uint64
	pinged          bool
	heartbeat       *time.Ticker
}

// resume is the position the client must resume from.
func (ls *liveStream) resume() uint64 { return resumePoint(ls.sent, ls.firstSeen) }

// follow sends what the stream holds up to pos, the position from which
// sub gets the live events, then those, until the client goes away (false)
// or sub ended. It returns true when the stream should catch up and
// subscribe again.
func (ls *liveStream) follow(ctx context.Context, sub *subscriber, pos uint64) (again bool) {
	if !ls.pinged {
		// The first ping flushes the response headers: the client knows
		// the stream is open, and every event published from now on will
		// come.
		if err := ls.send.Data(StreamPing{Time: time.Now().UTC()}); err != nil {
			return false
		}
		ls.pinged = true
	}
	if err := ls.history(ctx, pos); err != nil {
		if !errors.Is(err, errClientGone) && ctx.Err() == nil {
			ls.log.Error("api: read the live stream's history", "err", err)
			_ = ls.send(reconnectMessage(ls.resume(), "unavailable"))
		}
		return false
	}
	ls.from = streamPosition{After: max(pos, ls.from.After), Set: true}
	if ls.tellWaiting(ctx) != nil {
		return false
	}
	for {
		select {
		case <-ctx.Done():
			return false
		case it := <-sub.items:
			if ls.take(it) != nil {
				return false
			}
			if w := ls.spec.waiting; w != nil && w.changes(it.env) && ls.tellWaiting(ctx) != nil {
				return false
			}
		case <-ls.heartbeat.C:
			if err := ls.send.Data(StreamPing{Time: time.Now().UTC()}); err != nil {
				return false
			}
		case <-sub.ended:
			// The fan-out puts nothing more into the buffer: send what it
			// holds, in order, and see how long that took.
			for len(sub.items) > 0 {
				if ls.take(<-sub.items) != nil {
					return false
				}
			}
			if sub.unavailable {
				_ = ls.send(reconnectMessage(ls.resume(), "unavailable"))
				return false
			}
			if time.Since(sub.endedAt) > ls.s.cfg.SlowClientTimeout {
				_ = ls.send(reconnectMessage(ls.resume(), "slow_client"))
				return false
			}
			return true
		}
	}
}

// tellWaiting sends what the session waits for when it changed. A failed
// read is logged and skipped: the next change tells it again.
func (ls *liveStream) tellWaiting(ctx context.Context) error {
	if ls.spec.waiting == nil {
		return nil
	}
	msg, err := ls.spec.waiting.next(ctx)
	if err != nil {
		if ctx.Err() == nil {
			ls.log.Warn("api: what the session waits for", "err", err)
		}
		return nil
	}
	if msg == nil {
		return nil
	}
	if err := ls.send.Data(*msg); err != nil {
		return errClientGone
	}
	return nil
}

// errClientGone is why a stream stops when the client cannot be written to.
var errClientGone = errors.New("api: client gone")

// take sends it when the stream carries it.
func (ls *liveStream) take(it streamItem) error {
	ls.from = streamPosition{After: it.seq, Set: true}
	if ls.spec.owner != "" && it.env.OwnerID != ls.spec.owner {
		return nil
	}
	if ls.spec.keep != nil && !ls.spec.keep(it.env) {
		return nil
	}
	if ls.firstSeen == 0 {
		ls.firstSeen = it.seq
	}
	if ls.spec.waiting != nil {
		ls.spec.waiting.observe(it.env)
	}
	if err := ls.send(sse.Message{ID: int(it.seq), Data: streamData(it.env)}); err != nil {
		return errClientGone
	}
	ls.sent = it.seq
	ls.heartbeat.Reset(ls.s.cfg.HeartbeatInterval)
	return nil
}

// history sends the stream's events after ls.from up to upTo: those the
// client asked for from before the fan-out took it, or those it missed
// while it was too slow for the fan-out.
func (ls *liveStream) history(ctx context.Context, upTo uint64) error {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: ls.spec.subjects}
	switch from := ls.from; {
	case from.Set:
		if from.After >= upTo {
			return nil
		}
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from.After+1
	case from.FromStart:
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	case !from.Since.IsZero():
		since := from.Since
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	default:
		return nil // new events only
	}
	if upTo == 0 {
		return nil // the stream is empty
	}
	cons, err := ls.s.deps.JetStream.OrderedConsumer(ctx, bus.StreamEvents, cfg)
	if err != nil {
		return err
	}
	for {
		// NoWait: an empty answer means everything stored is read, and
		// everything up to upTo was stored before the fan-out passed it.
		batch, err := cons.FetchNoWait(ls.s.cfg.StreamBuffer)
		if err != nil {
			return err
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			md, err := msg.Metadata()
			if err != nil {
				return err
			}
			if md.Sequence.Stream > upTo {
				return nil // the fan-out delivers it
			}
			var env bus.Envelope
			if err := json.Unmarshal(msg.Data(), &env); err != nil {
				ls.log.Warn("api: skip malformed event", "seq", md.Sequence.Stream, "err", err)
				ls.from = streamPosition{After: md.Sequence.Stream, Set: true}
				continue
			}
			if err := ls.take(streamItem{seq: md.Sequence.Stream, env: env}); err != nil {
				return err
			}
		}
		if err := batch.Error(); err != nil {
			return err
		}
		if n == 0 {
			return nil
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
