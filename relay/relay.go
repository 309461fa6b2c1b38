// Package relay bridges each agent session's Redis streams and JetStream.
//
// Inbound, it reads the event stream agent:session:{<id>} of every session
// it holds through the consumer group "agentbus-relay" and publishes each
// entry to agents.sidecar.<id>.events.<type> with Nats-Msg-Id
// <id>:<entry id>; it acknowledges an entry in Redis (XACK) only after
// JetStream stored it. Outbound, it consumes AGENTS_SIDECAR_COMMANDS with
// the durable consumer "relay-outbound" and appends each command to
// agent:session:{<id>}:commands, acknowledging the message only after the
// XADD. See README.md for the message formats and the guarantees.
//
// Which sessions are relayed is kept in the JetStream KV bucket
// relay_sessions (Activate, Deactivate). Relay processes share the sessions
// through leases in that bucket: a session is relayed by exactly one live
// relay at a time, and a dead relay's sessions are taken over once its
// heartbeat in relay_members expires.
package relay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/agentbus/agentbus/bus"
)

// Default names.
const (
	// DefaultGroup is the Redis consumer group the relay reads event streams
	// with. A renamed group starts after the last event JetStream stores for
	// each session, so nothing is relayed twice, but the old group holds
	// trimming back until it is destroyed (XGROUP DESTROY).
	DefaultGroup = "agentbus-relay"
	// DefaultOutboundConsumer is the durable consumer on
	// AGENTS_SIDECAR_COMMANDS, defined in nats/consumers. The stream is a
	// work queue: a renamed consumer cannot be created while the old one
	// exists.
	DefaultOutboundConsumer = "relay-outbound"
	// SessionsBucket is the KV bucket of the sessions to relay and their leases.
	SessionsBucket = "relay_sessions"
	// MembersBucket is the KV bucket of the live relays' heartbeats.
	MembersBucket = "relay_members"
)

// Config configures a Relay.
type Config struct {
	// Redis is the client of the Redis server holding the sessions' streams. Required.
	Redis *redis.Client
	// JetStream publishes the events, consumes the commands and holds the
	// KV buckets. Required.
	JetStream jetstream.JetStream
	// Name identifies this process among the relays: its heartbeat key, the
	// owner of its leases and its consumer name in Redis. Default: the host
	// name and a random suffix. A stable name (a pod name) lets a restarted
	// relay take its sessions back at once instead of after LeaseTTL.
	Name string
	// Group is the Redis consumer group on every event stream. Default "agentbus-relay".
	Group string
	// MaxBatch is the most events published as one atomic batch (one fsync);
	// the server's limit is 1000. Default 1000.
	MaxBatch int
	// BatchMin, when set, is the fewest events of a round published as one
	// atomic batch; fewer are pipelined one by one. By default (0) the relay
	// chooses for each round the way it measured to be faster: an event on
	// its own costs about one fsync, a batch a fixed few, and both vary with
	// the disk's load.
	BatchMin int
	// ReadCount is the most entries read from one session's stream per read.
	// Default 100.
	ReadCount int
	// Block is how long a read waits for new entries when all sessions are
	// idle. Default 1s.
	Block time.Duration
	// Sweep is how often, while Redis keyspace notifications tell the relay
	// which streams got new entries, it reads every held stream anyway, and
	// checks the notifications still arrive. A lost notification delays an
	// entry by at most about this long. Default 30s.
	Sweep time.Duration
	// PublishTimeout bounds one publish to JetStream. Default 10s.
	PublishTimeout time.Duration
	// LeaseTTL is how long a relay's heartbeat lives: a dead relay's sessions
	// are taken over within about LeaseTTL plus a heartbeat. Default 10s.
	LeaseTTL time.Duration
	// DrainQuiet is how long a draining session must have been idle before
	// the relay stops relaying it. Default 2s.
	DrainQuiet time.Duration
	// TrimInterval is how often the relay trims the streams of its sessions.
	// Default 30s; negative turns trimming off.
	TrimInterval time.Duration
	// TrimKeep is how many acknowledged entries trimming keeps below the
	// oldest unacknowledged one, as history. Default 1000.
	TrimKeep int64
	// CommandDedupTTL is how long the id of a command written to Redis is
	// remembered, so a redelivered command is not written twice. It must
	// exceed the time a command can take to be redelivered. Default 24h.
	CommandDedupTTL time.Duration
	// OutboundConsumer is the durable consumer on AGENTS_SIDECAR_COMMANDS.
	// Default "relay-outbound".
	OutboundConsumer string
	// DisableOutbound turns the command direction off.
	DisableOutbound bool
	// Logger receives the relay's log; default slog.Default(). Lines carry
	// component=relay and, where one applies, session_id.
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Name == "" {
		host, _ := os.Hostname()
		c.Name = sanitizeName(host) + "-" + randomHex(4)
	}
	if c.Group == "" {
		c.Group = DefaultGroup
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 1000
	}
	if c.BatchMin < 0 {
		c.BatchMin = 0
	}
	if c.ReadCount <= 0 {
		c.ReadCount = 100
	}
	if c.Block <= 0 {
		c.Block = time.Second
	}
	if c.Sweep <= 0 {
		c.Sweep = 30 * time.Second
	}
	if c.PublishTimeout <= 0 {
		c.PublishTimeout = 10 * time.Second
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 10 * time.Second
	}
	if c.DrainQuiet <= 0 {
		c.DrainQuiet = 2 * time.Second
	}
	if c.TrimInterval == 0 {
		c.TrimInterval = 30 * time.Second
	}
	if c.TrimKeep <= 0 {
		c.TrimKeep = 1000
	}
	if c.CommandDedupTTL <= 0 {
		c.CommandDedupTTL = 24 * time.Hour
	}
	if c.OutboundConsumer == "" {
		c.OutboundConsumer = DefaultOutboundConsumer
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports a configuration the relay cannot run with.
func (c Config) Validate() error {
	switch {
	case c.Redis == nil:
		return errors.New("relay: Config.Redis is required")
	case c.JetStream == nil:
		return errors.New("relay: Config.JetStream is required")
	case c.MaxBatch > 1000:
		return fmt.Errorf("relay: Config.MaxBatch %d exceeds the server's atomic batch limit of 1000", c.MaxBatch)
	case c.LeaseTTL < 100*time.Millisecond:
		return fmt.Errorf("relay: Config.LeaseTTL %s is below 100ms", c.LeaseTTL)
	case c.Name != sanitizeName(c.Name):
		return fmt.Errorf("relay: Config.Name %q may hold only a-z, A-Z, 0-9, '-' and '_'", c.Name)
	}
	return nil
}

// Relay bridges the Redis streams of the sessions it holds and JetStream.
type Relay struct {
	cfg    Config
	log    *slog.Logger
	rdb    *redis.Client
	js     jetstream.JetStream
	events jetstream.Stream

	// leaseUntil is the local time (Unix ns) until which this relay's
	// heartbeat is certainly alive; past it the relay neither reads nor
	// publishes, so it never relays a session another relay took over.
	leaseUntil atomic.Int64

	mu   sync.Mutex
	want map[string]*control // sessions held, shared by coordinator and pump
	// wantGen counts the changes to want and to its controls' draining, so
	// the pump looks at want only when it changed.
	wantGen atomic.Uint64

	// notifying is set while keyspace notifications are known to reach the
	// relay: the pump then reads only the streams in dirty, and every
	// stream once when sweepAll is set.
	notifying atomic.Bool
	sweepAll  atomic.Bool
	dirtyMu   sync.Mutex
	dirty     map[string]struct{} // keys of streams with new entries

	// touched lists the sessions whose streams grew since the last trim.
	touchedMu sync.Mutex
	touched   map[string]struct{}

	wake     chan struct{}
	blocked  atomic.Int64 // client id of the pump's connection while it blocks
	acks     chan ackJob
	pumpDone chan struct{}

	ready atomic.Bool
}

// control is what the coordinator tells the pump about one held session,
// and what the pump answers.
type control struct {
	draining bool
	// release, when set, asks the pump to stop relaying the session; the
	// pump closes it once no read entry of the session is unpublished.
	release chan struct{}
	// drained is set by the pump once a draining session is idle and
	// everything read from it is published.
	drained bool
}

// New returns a relay for cfg. Run starts it.
func New(cfg Config) (*Relay, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Relay{
		cfg:      cfg,
		log:      cfg.Logger.With("component", "relay", "relay", cfg.Name),
		rdb:      cfg.Redis,
		js:       cfg.JetStream,
		want:     map[string]*control{},
		dirty:    map[string]struct{}{},
		touched:  map[string]struct{}{},
		wake:     make(chan struct{}, 1),
		acks:     make(chan ackJob, 256),
		pumpDone: make(chan struct{}),
	}
	return r, nil
}

// Name returns the relay's name among the relays.
func (r *Relay) Name() string { return r.cfg.Name }

// Ready reports whether the relay has joined the relays and relays its sessions.
func (r *Relay) Ready() bool { return r.ready.Load() }

// Notifying reports whether the relay learns which streams got new entries
// from Redis keyspace notifications; without them it reads every stream it
// holds each round.
func (r *Relay) Notifying() bool { return r.notifying.Load() }

// Held returns the ids of the sessions this relay currently holds.
func (r *Relay) Held() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.want))
	for id, c := range r.want {
		if c.release == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// Run relays until ctx ends or a part of the relay fails for good. Lost
// connections are not fatal: the relay retries, and nothing read from Redis
// is acknowledged before JetStream stored it. When ctx ends, Run releases
// the sessions it holds (best effort, within a few seconds) so another relay
// takes them over at once; a relay that dies without doing so loses nothing
// either, its sessions are taken over after LeaseTTL.
func (r *Relay) Run(ctx context.Context) error {
	var sessions, members jetstream.KeyValue
	for failures := 0; ; failures++ {
		var err error
		sessions, members, err = r.setup(ctx)
		if err == nil {
			break
		}
		if errors.Is(err, errNoAtomic) {
			return err
		}
		if failures == 0 || failures%20 == 0 {
			r.log.Warn("starting failed, retrying", "err", err)
		}
		if !sleep(ctx, backoff(failures)) {
			return nil
		}
	}
	pu, err := newPump(r)
	if err != nil {
		return err
	}
	hb := newHeartbeat(r, members)
	leasePub, err := bus.NewPublisher(r.js, bus.PublisherConfig{Timeout: kvTimeout, Logger: r.log})
	if err != nil {
		return err
	}
	co := &coordinator{r: r, sessions: sessions, members: members, hb: hb, pub: leasePub}

	g, gctx := errgroup.WithContext(ctx)
	pumpCtx, stopPump := context.WithCancel(gctx)
	defer stopPump()
	g.Go(func() error { hb.run(gctx); return nil })
	g.Go(func() error { return co.run(gctx, stopPump) })
	g.Go(func() error { return pu.run(pumpCtx) })
	g.Go(func() error { r.acker(gctx); return nil })
	g.Go(func() error { newNotifier(r).run(pumpCtx); return nil })
	if r.cfg.TrimInterval > 0 {
		g.Go(func() error { r.trimmer(gctx); return nil })
	}
	if !r.cfg.DisableOutbound {
		g.Go(func() error { return r.outbound(gctx) })
	}
	err = g.Wait()
	r.ready.Store(false)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

var errNoAtomic = fmt.Errorf("relay: stream %s must allow atomic batch publish (allow_atomic)", bus.StreamSidecarEvents)

// setup looks up the event stream and opens the KV buckets.
func (r *Relay) setup(ctx context.Context) (sessions, members jetstream.KeyValue, err error) {
	ctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	events, err := r.js.Stream(ctx, bus.StreamSidecarEvents)
	if err != nil {
		return nil, nil, fmt.Errorf("relay: stream %s: %w", bus.StreamSidecarEvents, err)
	}
	if !events.CachedInfo().Config.AllowAtomicPublish {
		return nil, nil, errNoAtomic
	}
	r.events = events
	if sessions, err = SessionsKV(ctx, r.js); err != nil {
		return nil, nil, err
	}
	if members, err = membersKV(ctx, r.js, r.cfg.LeaseTTL); err != nil {
		return nil, nil, err
	}
	return sessions, members, nil
}

// wakeUp interrupts the pump's wait for new entries, so a change in the held
// sessions takes effect at once.
func (r *Relay) wakeUp() {
	r.rearm()
	if id := r.blocked.Load(); id != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = r.rdb.ClientUnblock(ctx, id).Err()
	}
}

// setNotifying records whether keyspace notifications reach the relay.
// When they start to, every held stream is read once: what was written
// before the subscription was not notified.
func (r *Relay) setNotifying(on bool) {
	if r.notifying.Swap(on) != on {
		if on {
			r.sweepAll.Store(true)
		}
		r.rearm()
	}
}

// eventsKeyPrefix starts the key of every session's event stream.
var eventsKeyPrefix = strings.TrimSuffix(EventsKey(""), "}")

// markDirty records that the stream key got a new entry.
func (r *Relay) markDirty(key string) {
	if !strings.HasPrefix(key, eventsKeyPrefix) || !strings.HasSuffix(key, "}") {
		return // a command stream, or not a session's stream at all
	}
	r.dirtyMu.Lock()
	r.dirty[key] = struct{}{}
	r.dirtyMu.Unlock()
	r.rearm()
}

// takeDirty returns the keys marked dirty since the last call.
func (r *Relay) takeDirty() map[string]struct{} {
	r.dirtyMu.Lock()
	defer r.dirtyMu.Unlock()
	if len(r.dirty) == 0 {
		return nil
	}
	d := r.dirty
	r.dirty = map[string]struct{}{}
	return d
}

// touch records that a session's streams grew, for the trimmer.
func (r *Relay) touch(sessionID string) {
	r.touchedMu.Lock()
	r.touched[sessionID] = struct{}{}
	r.touchedMu.Unlock()
}

// rearm leaves a wake for the pump without interrupting a read.
func (r *Relay) rearm() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// leaseValid reports whether this relay may read and publish now.
func (r *Relay) leaseValid() bool { return time.Now().UnixNano() < r.leaseUntil.Load() }

func sanitizeName(s string) string {
	var b strings.Builder
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
			b.WriteRune(c)
		default:
			b.WriteRune('_')
		}
	}
	if b.Len() == 0 {
		return "relay"
	}
	return b.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// sleep waits for d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// backoff returns the wait before retry n (from 0): 100ms doubling to 5s.
func backoff(n int) time.Duration {
	d := 100 * time.Millisecond
	for i := 0; i < n && d < 5*time.Second; i++ {
		d *= 2
	}
	return min(d, 5*time.Second)
}
