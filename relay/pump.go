package relay

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/agentbus/agentbus/bus"
)

// pump relays the event streams of the held sessions: one XREADGROUP over
// the streams with new entries, the entries published in order as atomic
// batches, then XACK. Only after a batch is stored does the next one go
// out, so a session's events reach JetStream in stream order and a failure
// never leaves a gap.
//
// Which streams have new entries it learns from the notifier; while
// notifications are not known to arrive, it reads every stream each round.
type pump struct {
	r *Relay
	// pub publishes a round's events as atomic batches or one by one
	// (pipelined), whichever it measured to be done sooner, or as
	// Config.BatchMin fixes.
	pub        *bus.Publisher
	sessions   map[string]*session
	byKey      map[string]*session
	order      []*session
	ready      []*session
	conn       *redis.Conn
	connID     int64
	readClient *redis.Client
	idle       bool
	failures   int

	gen      uint64     // Relay.wantGen applied last
	needSync bool       // some session is not synced
	queue    []*session // sessions to read, with notifications
	draining []*session
	// nextSweep is when every held stream is read next, with notifications.
	nextSweep time.Time
}

// readKeys bounds the streams one read names, with notifications: a read
// of many streams is a long command for Redis, during which it serves no
// one else.
const readKeys = 500

// session is the pump's state of one held session.
type session struct {
	id, key string
	ctl     *control
	// synced is false until the consumer group exists and published holds
	// what JetStream stores; it turns false again when a publish of the
	// session's events failed in an unknown state.
	synced bool
	// claimed is set once the entries other consumers read but did not
	// acknowledge were moved to this relay.
	claimed bool
	// cursor is ">" when reading new entries, else the id after which to
	// read this relay's own pending entries.
	cursor string
	// published is the id of the session's last event JetStream stores:
	// every earlier entry is stored too, later ones are not.
	published string
	lastRead  time.Time
	// retryAt delays preparing a session whose key Redis refused.
	retryAt  time.Time
	failures int
	read     int  // entries read in the current round
	live     bool // the current round reads new entries
	draining bool
	// queued is set while the session waits in the pump's queue.
	queued bool
	// gone is set once the pump stopped relaying the session.
	gone bool
	// checked is when a quiet draining session was last read to see
	// whether it is drained.
	checked time.Time
}

func newPump(r *Relay) (*pump, error) {
	// The publisher never leaves a later event of a run stored after an
	// earlier one that is not: that is what lets the relay find where a
	// session stopped from its last stored event alone.
	pub, err := bus.NewPublisher(r.js, bus.PublisherConfig{
		MaxBatch:     r.cfg.MaxBatch,
		MinBatch:     r.cfg.BatchMin,
		MeasureBatch: r.cfg.BatchMin == 0,
		Timeout:      r.cfg.PublishTimeout,
		Logger:       r.log,
	})
	if err != nil {
		return nil, err
	}
	return &pump{
		r:        r,
		pub:      pub,
		sessions: map[string]*session{},
		byKey:    map[string]*session{},
	}, nil
}

// publish publishes msgs in order, as atomic batches or one by one,
// whichever it expects to be done sooner.
func (p *pump) publish(ctx context.Context, msgs []*nats.Msg) error {
	return p.pub.PublishMsgs(ctx, msgs)
}

func (p *pump) run(ctx context.Context) error {
	defer close(p.r.pumpDone)
	defer func() {
		p.closeConn()
		if p.readClient != nil {
			_ = p.readClient.Close()
		}
	}()
	defer p.pub.Watch()()
	for ctx.Err() == nil {
		// Wakes that came before this reconcile are served by it.
		select {
		case <-p.r.wake:
		default:
		}
		p.reconcile()
		if len(p.order) == 0 || !p.r.leaseValid() {
			p.wait(ctx, p.r.cfg.Block)
			continue
		}
		if err := p.sync(ctx); err != nil {
			p.fail(ctx, "preparing sessions", err)
			continue
		}
		if err := p.round(ctx); err != nil {
			p.fail(ctx, "relaying events", err)
			continue
		}
		if p.failures > 0 {
			p.r.log.Info("relaying again")
		}
		p.failures = 0
	}
	return nil
}

// wait sleeps for d or until woken.
func (p *pump) wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-p.r.wake:
		// Keep the wake for the next reconcile.
		p.r.rearm()
	}
}

// fail logs err, rewinds every session to its pending entries and waits
// before the next attempt.
func (p *pump) fail(ctx context.Context, what string, err error) {
	if ctx.Err() != nil {
		return
	}
	if p.failures == 0 || p.failures%20 == 0 {
		p.r.log.Warn(what+" failed, retrying", "err", err, "attempt", p.failures+1)
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		// Redis refused a read: a stream or its group is gone (a restart
		// without its data, a deleted key) or a key is not a stream. Prepare
		// every session again; one whose key stays broken is set aside.
		for _, s := range p.order {
			s.synced = false
		}
	}
	for _, s := range p.order {
		s.cursor = "0-0"
		p.enqueue(s)
	}
	p.needSync = true
	p.idle = false
	sleep(ctx, backoff(p.failures))
	p.failures++
}

// reconcile applies the coordinator's decisions: new sessions, sessions to
// release or drop, draining ones.
func (p *pump) reconcile() {
	gen := p.r.wantGen.Load()
	if gen == p.gen {
		return
	}
	p.gen = gen
	changed := false
	p.r.mu.Lock()
	for id, ctl := range p.r.want {
		s := p.sessions[id]
		if ctl.release != nil {
			if s != nil {
				delete(p.sessions, id)
				s.gone = true
				changed = true
			}
			select {
			case <-ctl.release:
			default:
				close(ctl.release)
			}
			continue
		}
		if s == nil || s.ctl != ctl {
			if s != nil {
				s.gone = true
			}
			s = &session{id: id, key: EventsKey(id), ctl: ctl, cursor: "0-0", lastRead: time.Now()}
			p.sessions[id] = s
			p.needSync = true
			changed = true
		}
		s.draining = ctl.draining
	}
	for id, s := range p.sessions {
		if ctl, ok := p.r.want[id]; !ok || ctl != s.ctl {
			delete(p.sessions, id)
			s.gone = true
			changed = true
		}
	}
	p.r.mu.Unlock()
	p.draining = p.draining[:0]
	for _, s := range p.sessions {
		if s.draining {
			p.draining = append(p.draining, s)
		}
	}
	if changed {
		p.order = p.order[:0]
		clear(p.byKey)
		for _, s := range p.sessions {
			p.order = append(p.order, s)
			p.byKey[s.key] = s
		}
		slices.SortFunc(p.order, func(a, b *session) int { return strings.Compare(a.id, b.id) })
		p.idle = false
	}
}

// entryRef ties a message of a round to its session and entry.
type entryRef struct {
	s   *session
	id  string
	typ string
}

// batch is what one round read: the messages to publish, in order, and the
// entries to acknowledge without publishing.
type batch struct {
	msgs []*nats.Msg
	refs []entryRef
	acks map[*session][]string
}

// round reads from the held sessions with new entries (from every held
// session without notifications) and publishes what it read.
func (p *pump) round(ctx context.Context) error {
	cfg := p.r.cfg
	block := time.Duration(-1)
	notified := p.r.notifying.Load()
	var list []*session
	if notified {
		list = p.pick(time.Now())
		if len(list) == 0 {
			p.wait(ctx, max(min(cfg.Block, time.Until(p.nextSweep)), time.Millisecond))
			return nil
		}
	} else {
		list, block = p.sweep()
		if len(list) == 0 {
			p.wait(ctx, cfg.Block)
			return nil
		}
	}
	for _, s := range list {
		s.live = s.cursor == ">"
		s.read = 0
	}
	b := &batch{acks: map[*session][]string{}}
	if err := p.readRound(ctx, list, block, notified, b); err != nil {
		return err
	}
	if err := p.ack(ctx, b.acks); err != nil {
		return err
	}
	if err := p.publishRound(ctx, b); err != nil {
		return err
	}
	p.settle(list)
	return nil
}

// sweep returns every synced session, to be read without notifications,
// and how long their read may block: only when every stream reads new
// entries and the last round found none may it wait for more.
func (p *pump) sweep() ([]*session, time.Duration) {
	// Every stream is read: the marks are not needed.
	p.r.takeDirty()
	live := true
	list := p.ready[:0]
	for _, s := range p.order {
		live = live && (!s.synced || s.cursor == ">")
		if s.synced {
			list = append(list, s)
		}
	}
	p.ready = list
	if live && p.idle {
		return list, p.r.cfg.Block
	}
	return list, -1
}

// readRound reads the entries of list into b, blocking the first read for
// block (not at all when negative).
//
// COUNT applies to each stream: reading all sessions at once with at most
// MaxBatch entries in all (one per session when there are more) bounds the
// memory a round takes. Sessions that filled their count may hold more:
// they are read again while the batch has room, so that a few busy
// sessions among many idle ones still make full batches.
func (p *pump) readRound(ctx context.Context, list []*session, block time.Duration, notified bool, b *batch) error {
	cfg := p.r.cfg
	count := min(max(cfg.MaxBatch/len(list), 1), cfg.ReadCount)
	for reads := 1; ; reads++ {
		res, err := p.read(ctx, list, count, block)
		if err != nil {
			return err
		}
		full := p.take(res, list, count, b)
		room := cfg.MaxBatch - len(b.msgs)
		if len(full) == 0 || room < max(cfg.MaxBatch/4, len(full)) || reads == 4 {
			if notified {
				// The next round reads them again.
				for _, s := range full {
					p.enqueue(s)
				}
			}
			return nil
		}
		list, block = full, -1
		count = min(room/len(full), cfg.ReadCount)
	}
}

// publishRound publishes the messages of b in batches of at most MaxBatch,
// acknowledging each batch's entries once JetStream stored it.
func (p *pump) publishRound(ctx context.Context, b *batch) error {
	maxBatch := p.r.cfg.MaxBatch
	for start := 0; start < len(b.msgs); start += maxBatch {
		end := min(start+maxBatch, len(b.msgs))
		if !p.r.leaseValid() {
			return errors.New("lease not renewed in time, pausing")
		}
		if err := p.publish(ctx, b.msgs[start:end]); err != nil {
			// Whether JetStream stored the batch is unknown: ask it again.
			for _, ref := range b.refs[start:end] {
				ref.s.synced = false
			}
			return err
		}
		clear(b.acks)
		for _, ref := range b.refs[start:end] {
			if len(b.acks[ref.s]) == 0 {
				p.r.touch(ref.s.id)
			}
			ref.s.published = ref.id
			b.acks[ref.s] = append(b.acks[ref.s], ref.id)
		}
		if err := p.ack(ctx, b.acks); err != nil {
			return err
		}
	}
	return nil
}

// settle records what the round read of each of its sessions: when one
// last read entries, whether a draining one is drained, and whether the
// pump is idle.
func (p *pump) settle(round []*session) {
	now := time.Now()
	total := 0
	p.r.mu.Lock()
	for _, s := range round {
		total += s.read
		if s.read > 0 {
			s.lastRead = now
		}
		// Drained: nothing pending, nothing new for a while.
		s.ctl.drained = s.draining && s.live && s.read == 0 && now.Sub(s.lastRead) >= p.r.cfg.DrainQuiet
	}
	p.r.mu.Unlock()
	p.idle = total == 0
}

// pick returns the sessions to read this round, with notifications: those
// notified (or all, when a sweep is due), the ones reading their pending
// entries, and draining ones quiet for long enough to be drained.
func (p *pump) pick(now time.Time) []*session {
	for key := range p.r.takeDirty() {
		if s := p.byKey[key]; s != nil {
			p.enqueue(s)
		}
	}
	if p.r.sweepAll.Swap(false) || !now.Before(p.nextSweep) {
		for _, s := range p.order {
			p.enqueue(s)
		}
		p.nextSweep = now.Add(p.r.cfg.Sweep)
	}
	list := p.ready[:0]
	for len(list) < readKeys && len(p.queue) > 0 {
		s := p.queue[0]
		p.queue[0] = nil
		p.queue = p.queue[1:]
		s.queued = false
		if !s.gone && s.synced {
			list = append(list, s)
		}
	}
	if len(p.queue) == 0 {
		p.queue = nil
	}
	quiet := p.r.cfg.DrainQuiet
	for _, s := range p.draining {
		// A drained session is read once more after its quiet period, so a
		// lost notification cannot end it with entries left.
		if s.synced && !s.queued && s.cursor == ">" && now.Sub(s.lastRead) >= quiet && now.Sub(s.checked) >= quiet/4 &&
			!slices.Contains(list, s) {
			s.checked = now
			list = append(list, s)
		}
	}
	p.ready = list
	return list
}

// enqueue adds s to the sessions to read, with notifications.
func (p *pump) enqueue(s *session) {
	if !s.queued && !s.gone {
		s.queued = true
		p.queue = append(p.queue, s)
	}
}

// take adds what one read of list returned to b and moves the cursors on.
// It returns the sessions that may hold more: those that returned count
// entries, and those that reached the end of their pending entries.
func (p *pump) take(res []redis.XStream, list []*session, count int, b *batch) (full []*session) {
	got := make(map[*session]int, len(res))
	for _, xs := range res {
		s := p.byKey[xs.Stream]
		if s == nil {
			continue
		}
		got[s] = len(xs.Messages)
		s.read += len(xs.Messages)
		for _, m := range xs.Messages {
			if m.Values == nil || !idAfter(m.ID, s.published) {
				// Deleted while pending, or stored already (the XACK was
				// lost): acknowledge without publishing.
				b.acks[s] = append(b.acks[s], m.ID)
				continue
			}
			msg := newEventMsg(s.id, m.ID, m.Values, int(p.r.js.Conn().MaxPayload()))
			b.msgs = append(b.msgs, msg)
			b.refs = append(b.refs, entryRef{s: s, id: m.ID, typ: msg.Header.Get(bus.HeaderType)})
		}
		if s.cursor != ">" && len(xs.Messages) > 0 {
			s.cursor = xs.Messages[len(xs.Messages)-1].ID
		}
		if len(xs.Messages) >= count {
			full = append(full, s)
		}
	}
	for _, s := range list {
		// A read of pending entries that came back short reached the end of
		// this relay's pending entries: read new ones from now on, starting
		// at once, since entries written before the session was taken up
		// were never notified.
		if s.cursor != ">" && got[s] < count {
			s.cursor = ">"
			full = append(full, s)
		}
	}
	return full
}

// read runs XREADGROUP on the pump's own connection. A blocking read can be
// interrupted by wakeUp (CLIENT UNBLOCK), so new sessions start at once.
func (p *pump) read(ctx context.Context, list []*session, count int, block time.Duration) ([]redis.XStream, error) {
	streams := make([]string, 2*len(list))
	for i, s := range list {
		streams[i] = s.key
		streams[len(list)+i] = s.cursor
	}
	if p.conn == nil {
		p.conn = p.reader().Conn()
		id, err := p.conn.ClientID(ctx).Result()
		if err != nil {
			p.closeConn()
			return nil, err
		}
		p.connID = id
	}
	if block >= 0 {
		p.r.blocked.Store(p.connID)
		defer p.r.blocked.Store(0)
		select {
		case <-p.r.wake:
			p.r.rearm()
			block = -1
		default:
		}
	}
	res, err := p.conn.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group:    p.r.cfg.Group,
		Consumer: p.r.cfg.Name,
		Streams:  streams,
		Count:    int64(count),
		Block:    block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	var rerr redis.Error
	if err != nil && !errors.As(err, &rerr) {
		// A connection error: the connection may be broken.
		p.closeConn()
	}
	return res, err
}

// reader returns the client the pump reads with. It never retries a
// command by itself: an XREADGROUP whose answer was lost has delivered its
// entries to this relay all the same, and reading on would skip them. The
// pump instead reads its pending entries again from the start.
func (p *pump) reader() *redis.Client {
	if p.readClient == nil {
		opts := *p.r.rdb.Options()
		opts.MaxRetries = -1
		opts.PoolSize = 1
		opts.MinIdleConns = 0
		p.readClient = redis.NewClient(&opts)
	}
	return p.readClient
}

func (p *pump) closeConn() {
	if p.conn != nil {
		_ = p.conn.Close()
		p.conn = nil
		p.connID = 0
	}
}

// ack queues the XACKs of acks for the acker.
func (p *pump) ack(ctx context.Context, acks map[*session][]string) error {
	for s, ids := range acks {
		if len(ids) == 0 {
			continue
		}
		select {
		case p.r.acks <- ackJob{key: s.key, ids: slices.Clone(ids)}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
