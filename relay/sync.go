package relay

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/agentbus/agentbus/bus"
)

// syncConcurrency bounds the sessions whose pending entries are claimed at
// once (on takeover): a few round trips to Redis each.
const syncConcurrency = 64

// sync prepares the sessions that are not: after taking a lease, after a
// publish that failed in an unknown state, after Redis lost a group.
//
// Every session to prepare is prepared at once: one lookup in JetStream per
// few dozen sessions, one pipeline of XGROUP CREATE to Redis, then the
// takeovers' claims. A session whose key Redis refuses (not a stream) is
// set aside and tried again later, so it does not hold the others up; any
// other error stops the round.
//
// Preparing a session finds where its relaying stopped and makes sure its
// consumer group exists:
//
//   - The last event JetStream stores for the session names the entry it came
//     from (Agents-Redis-Entry). Since a session's events are stored in order
//     and without gaps, every entry up to that one is stored and every later
//     one is not, whatever the duplicate window: entries up to it are
//     acknowledged without publishing.
//   - The group is created after that entry (from the start for a new
//     session), so a stream Redis lost and got back empty is not read twice.
//   - On taking the lease, the entries other consumers (a dead relay) read
//     but did not acknowledge are claimed, to be read again from this
//     relay's pending entries.
func (p *pump) sync(ctx context.Context) error {
	if !p.needSync {
		return nil
	}
	now := time.Now()
	var todo []*session
	waiting := false
	for _, s := range p.order {
		switch {
		case s.synced:
		case now.Before(s.retryAt):
			waiting = true
		default:
			todo = append(todo, s)
		}
	}
	err := p.prepare(ctx, todo)
	for _, s := range todo {
		if s.synced {
			// Its pending entries are read next.
			p.enqueue(s)
		} else {
			waiting = true
		}
	}
	p.needSync = waiting || err != nil
	return err
}

func (p *pump) prepare(ctx context.Context, todo []*session) error {
	if len(todo) == 0 {
		return nil
	}
	ids := make([]string, len(todo))
	for i, s := range todo {
		ids[i] = s.id
	}
	last, err := p.r.lastRelayedMany(ctx, ids)
	if err != nil {
		return err
	}
	rdb, group := p.r.rdb, p.r.cfg.Group
	creates := make([]*redis.StatusCmd, len(todo))
	_, err = rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, s := range todo {
			start := last[s.id]
			if start == "" {
				start = "0"
			}
			creates[i] = pipe.XGroupCreateMkStream(ctx, s.key, group, start)
		}
		return nil
	})
	var rerr redis.Error
	if err != nil && !errors.As(err, &rerr) {
		// The pipeline failed as a whole (a connection error), not a command.
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(syncConcurrency)
	for i, s := range todo {
		err := creates[i].Err()
		switch {
		case err == nil:
			// A new group: no consumer has read anything to claim.
			s.claimed = true
		case !redis.HasErrorPrefix(err, "BUSYGROUP"):
			p.setAside(s, err)
			continue
		}
		g.Go(func() error {
			if !s.claimed {
				if err := p.claim(gctx, s); err != nil {
					var refused redis.Error
					if errors.As(err, &refused) {
						p.setAside(s, err)
						return nil
					}
					return err
				}
				s.claimed = true
			}
			if entry := last[s.id]; idAfter(entry, s.published) {
				s.published = entry
			}
			s.cursor = "0-0"
			s.synced = true
			s.failures = 0
			return nil
		})
	}
	return g.Wait()
}

// setAside delays preparing a session whose key Redis refused.
func (p *pump) setAside(s *session, err error) {
	s.retryAt = time.Now().Add(backoff(s.failures + 4))
	if s.failures == 0 {
		p.r.log.Warn("session stream refused, setting it aside", "session_id", s.id, "key", s.key, "err", err)
	}
	s.failures++
}

// claim moves every pending entry of the session's group to this relay and
// removes the other consumers that hold none.
func (p *pump) claim(ctx context.Context, s *session) error {
	rdb := p.r.rdb
	group, me := p.r.cfg.Group, p.r.cfg.Name
	consumers, err := rdb.XInfoConsumers(ctx, s.key, group).Result()
	if err != nil {
		return err
	}
	others := false
	for _, c := range consumers {
		if c.Name != me && c.Pending > 0 {
			others = true
		}
	}
	if others {
		for start := "0-0"; ; {
			_, next, err := rdb.XAutoClaimJustID(ctx, &redis.XAutoClaimArgs{
				Stream: s.key, Group: group, Consumer: me, Start: start, Count: 1000,
			}).Result()
			if err != nil {
				return err
			}
			if next == "0-0" || next == "" {
				break
			}
			start = next
		}
		p.r.log.Info("claimed pending entries of other relays", "session_id", s.id)
	}
	// Consumers left with nothing pending are removed, in one script so one
	// that has just read something is kept.
	return dropIdleConsumers.Run(ctx, rdb, []string{s.key}, group, me).Err()
}

// dropIdleConsumers removes the consumers of group ARGV[1] on stream
// KEYS[1], except ARGV[2], that have no pending entry. Relays that came and
// went would otherwise pile up in the group.
var dropIdleConsumers = redis.NewScript(`
local consumers = redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])
for _, c in ipairs(consumers) do
  local name, pending
  for i = 1, #c, 2 do
    if c[i] == 'name' then name = c[i + 1] elseif c[i] == 'pending' then pending = c[i + 1] end
  end
  if name ~= ARGV[2] and pending == 0 then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], name)
  end
end
return 0
`)

// lastRelayed returns the Redis entry id of the session's last event stored
// on JetStream, or "" when there is none.
func (r *Relay) lastRelayed(ctx context.Context, sessionID string) (string, error) {
	msg, err := r.events.GetLastMsgForSubject(ctx, bus.SidecarEventSubject(sessionID, ">"))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return msg.Header.Get(HeaderRedisEntry), nil
}

// ackJob is the XACK of entries of one stream.
type ackJob struct {
	key string
	ids []string
}

// acker acknowledges published entries in Redis, many streams per round
// trip. An XACK that cannot be sent is retried; one Redis refuses (the
// group is gone) is dropped, since the entry is stored on JetStream and the
// relay skips it when it reads it again.
func (r *Relay) acker(ctx context.Context) {
	const most = 128
	jobs := make([]ackJob, 0, most)
	for {
		jobs = jobs[:0]
		select {
		case <-ctx.Done():
			return
		case j := <-r.acks:
			jobs = append(jobs, j)
		}
		for more := true; more && len(jobs) < most; {
			select {
			case j := <-r.acks:
				jobs = append(jobs, j)
			default:
				more = false
			}
		}
		for failures := 0; ; failures++ {
			_, err := r.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
				for _, j := range jobs {
					pipe.XAck(ctx, j.key, r.cfg.Group, j.ids...)
				}
				return nil
			})
			var rerr redis.Error
			if err == nil || errors.As(err, &rerr) {
				break
			}
			if failures == 0 {
				r.log.Warn("acknowledging entries failed, retrying", "err", err)
			}
			if !sleep(ctx, backoff(failures)) {
				return
			}
		}
	}
}

// compareIDs compares two stream entry ids ("<ms>-<seq>") by value; ""
// comes before every id.
func compareIDs(a, b string) int {
	if a == b {
		return 0
	}
	if a == "" {
		return -1
	}
	if b == "" {
		return 1
	}
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	if c := compareUint(am, bm); c != 0 {
		return c
	}
	return compareUint(as, bs)
}

func compareUint(a, b string) int {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA != nil || errB != nil {
		return strings.Compare(a, b)
	}
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// idAfter reports whether entry id a comes after b.
func idAfter(a, b string) bool { return compareIDs(a, b) > 0 }
