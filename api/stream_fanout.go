package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/domain"
)

// fanout reads the live part of every stream of an API process from one
// JetStream ordered consumer over all the subjects the streams read, and
// hands each event to the streams that want it. Without it every client
// would have a consumer of its own: as many times the server's filtering
// and the decoding as there are clients.
//
// It reads while anyone listens: the first subscriber starts it at the end
// of AGENTS_EVENTS, the last one to leave stops it. A subscriber gets
// every event after the position subscribe returns, in stream order, and
// reads what came before from the stream itself (history), so that a
// resumed stream joins the live events without a gap or a repeat.
//
// Subscribers never hold it back: each has a buffer; a subscriber whose
// buffer is full is dropped and told so (lagged), and its stream catches
// up from the stream or tells its client to reconnect.
type fanout struct {
	js       jetstream.JetStream
	subjects []string
	log      *slog.Logger

	mu  sync.Mutex
	cur *fanoutRun // nil while nobody listens
	// lagged counts the subscribers dropped for a full buffer.
	lagged atomic.Int64
}

// fanoutRun is one ordered consumer's life, from the first subscriber to
// the last.
type fanoutRun struct {
	cc jetstream.ConsumeContext
	// pos is the last stream sequence handed out; every later event goes
	// to the subscribers.
	pos uint64
	// bySession holds the subscribers of one session's stream; they get
	// its events and every chain event (their stream picks its chains').
	bySession map[string]map[*subscriber]struct{}
	// byOwner holds the subscribers of an owner's sessions.
	byOwner map[string]map[*subscriber]struct{}
	// sessions holds every session subscriber, for chain events.
	sessions map[*subscriber]struct{}
}

// subscriber is one stream's share of the fan-out.
type subscriber struct {
	// session, when set, takes that session's events and chain events;
	// otherwise owner takes all events of the owner's.
	session string
	owner   string
	items   chan streamItem
	// ended is closed when the subscriber gets nothing more: its buffer
	// overflowed (at endedAt), or the fan-out stopped (unavailable).
	ended       chan struct{}
	endedAt     time.Time
	unavailable bool
}

func newFanout(js jetstream.JetStream, subjects []string) *fanout {
	return &fanout{js: js, subjects: subjects, log: slog.Default().With("component", "api", "stream", "fanout")}
}

func newSubscriber(session, owner string, buffer int) *subscriber {
	return &subscriber{session: session, owner: owner, items: make(chan streamItem, buffer), ended: make(chan struct{})}
}

// subscribe adds sub and returns the position after which it gets every
// event of its own.
func (f *fanout) subscribe(ctx context.Context, sub *subscriber) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur == nil {
		run, err := f.start(ctx)
		if err != nil {
			return 0, err
		}
		f.cur = run
	}
	run := f.cur
	if sub.session != "" {
		add(run.bySession, sub.session, sub)
		run.sessions[sub] = struct{}{}
	} else {
		add(run.byOwner, sub.owner, sub)
	}
	return run.pos, nil
}

// unsubscribe removes sub, and stops reading when it was the last one.
func (f *fanout) unsubscribe(sub *subscriber) {
	f.mu.Lock()
	defer f.mu.Unlock()
	run := f.cur
	if run == nil {
		return
	}
	run.remove(sub)
	if len(run.sessions) == 0 && len(run.byOwner) == 0 {
		run.cc.Stop()
		f.cur = nil
	}
}

func add(m map[string]map[*subscriber]struct{}, key string, sub *subscriber) {
	set := m[key]
	if set == nil {
		set = map[*subscriber]struct{}{}
		m[key] = set
	}
	set[sub] = struct{}{}
}

func (run *fanoutRun) remove(sub *subscriber) {
	m := run.byOwner
	key := sub.owner
	if sub.session != "" {
		m, key = run.bySession, sub.session
		delete(run.sessions, sub)
	}
	delete(m[key], sub)
	if len(m[key]) == 0 {
		delete(m, key)
	}
}

// start opens the ordered consumer at the end of the stream, so that the
// first subscriber's position is the stream's last event.
func (f *fanout) start(ctx context.Context) (*fanoutRun, error) {
	stream, err := f.js.Stream(ctx, bus.StreamEvents)
	if err != nil {
		return nil, err
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, err
	}
	run := &fanoutRun{pos: info.State.LastSeq, bySession: map[string]map[*subscriber]struct{}{},
		byOwner: map[string]map[*subscriber]struct{}{}, sessions: map[*subscriber]struct{}{}}
	cons, err := f.js.OrderedConsumer(ctx, bus.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: f.subjects,
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    run.pos + 1,
	})
	if err != nil {
		return nil, err
	}
	run.cc, err = cons.Consume(func(msg jetstream.Msg) { f.deliver(run, msg) },
		jetstream.PullMaxMessages(1024), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			f.log.Debug("api: live stream consumer", "err", err)
		}))
	if err != nil {
		return nil, err
	}
	go f.watch(run)
	return run, nil
}

// watch ends every subscriber of run when its consumer stops by itself
// (the stream is gone, the connection closed): their clients reconnect.
func (f *fanout) watch(run *fanoutRun) {
	<-run.cc.Closed()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur != run {
		return // stopped by the last unsubscribe
	}
	f.cur = nil
	for sub := range run.sessions {
		sub.end(true)
	}
	for _, set := range run.byOwner {
		for sub := range set {
			sub.end(true)
		}
	}
}

// deliver hands one event to the subscribers that want it. It decodes the
// event only when someone does.
func (f *fanout) deliver(run *fanoutRun, msg jetstream.Msg) {
	md, err := msg.Metadata()
	if err != nil {
		f.log.Error("api: live stream metadata", "err", err)
		return
	}
	// agents.evt.<aggregate>.<id>.<event>
	parts := strings.SplitN(msg.Subject(), ".", 5)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur != run {
		return
	}
	run.pos = md.Sequence.Stream
	if len(parts) < 5 {
		return
	}
	sessions := run.bySession[parts[3]]
	if parts[2] == domain.AggregateChain {
		sessions = run.sessions
	}
	if len(sessions) == 0 && len(run.byOwner) == 0 {
		return
	}
	var env bus.Envelope
	if err := json.Unmarshal(msg.Data(), &env); err != nil {
		f.log.Warn("api: skip malformed event", "seq", md.Sequence.Stream, "err", err)
		return
	}
	it := streamItem{seq: md.Sequence.Stream, env: env}
	for sub := range sessions {
		f.offer(run, sub, it)
	}
	for sub := range run.byOwner[env.OwnerID] {
		f.offer(run, sub, it)
	}
}

// offer puts it into sub's buffer, or drops sub when the buffer is full.
func (f *fanout) offer(run *fanoutRun, sub *subscriber, it streamItem) {
	select {
	case sub.items <- it:
	default:
		f.lagged.Add(1)
		run.remove(sub)
		sub.end(false)
	}
}

// end closes sub's ended; the fan-out's lock is held.
func (sub *subscriber) end(unavailable bool) {
	sub.endedAt, sub.unavailable = time.Now(), unavailable
	close(sub.ended)
}
