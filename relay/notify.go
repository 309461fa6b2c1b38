package relay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// probeWait is how long the notifier waits for the notification of its own
// probe before it concludes notifications do not reach it.
const probeWait = 2 * time.Second

// notifier tells the pump which event streams got new entries, from
// Redis's keyspace notifications (notify-keyspace-events with E and t: every
// XADD publishes the key on __keyevent@<db>__:xadd), so the pump reads only
// those instead of every stream it holds.
//
// Notifications are fire-and-forget: one published while the subscription
// is down is lost. So the pump counts on them only while the notifier has
// seen its own probe arrive on the current subscription (notifying), and
// reads every held stream once each time that starts; while it does not,
// the pump reads every stream, as without notifications. A notification
// lost any other way delays an entry until the next sweep, never loses it.
//
// The probe (an XADD to a key of the relay's own, deleted at once) tells
// apart a server with notifications off, a subscription refused by an ACL
// and a server on another database, without CONFIG GET, which the relay's
// Redis user need not be allowed.
type notifier struct {
	r        *Relay
	channel  string
	probeKey string
	warned   bool
}

func newNotifier(r *Relay) *notifier {
	return &notifier{
		r:        r,
		channel:  "__keyevent@" + strconv.Itoa(r.rdb.Options().DB) + "__:xadd",
		probeKey: "agent:relay:" + r.cfg.Name + ":probe",
	}
}

func (n *notifier) run(ctx context.Context) {
	defer n.r.setNotifying(false)
	for failures := 0; ctx.Err() == nil; {
		err := n.listen(ctx)
		n.r.setNotifying(false)
		if ctx.Err() != nil {
			return
		}
		var rerr redis.Error
		wait := backoff(failures)
		switch {
		case errors.Is(err, errNoNotifications), errors.As(err, &rerr):
			n.warn(err)
			wait = n.r.cfg.Sweep
		case failures == 0:
			n.r.log.Warn("keyspace notifications lost, reading every stream until they are back", "err", err)
		}
		failures++
		if !sleep(ctx, wait) {
			return
		}
	}
}

func (n *notifier) warn(err error) {
	if !n.warned {
		n.r.log.Warn("no Redis keyspace notifications: reading every stream each round, which costs Redis in proportion to the sessions held; "+
			"set notify-keyspace-events to include E and t (e.g. \"Et\") and allow the relay's user to subscribe to "+n.channel,
			"err", err)
	}
	n.warned = true
}

var errNoNotifications = errors.New("the probe's keyspace notification did not arrive")

// listen subscribes and passes notifications on until the subscription
// fails, or the probe shows notifications do not arrive.
func (n *notifier) listen(ctx context.Context) error {
	ps := n.r.rdb.Subscribe(ctx)
	defer ps.Close()
	// A read waiting for a message does not watch ctx.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer stop()
	if err := ps.Subscribe(ctx, n.channel); err != nil {
		return err
	}
	var probeDue, probeSent time.Time
	for ctx.Err() == nil {
		timeout := probeWait
		if !probeSent.IsZero() {
			timeout = max(time.Until(probeSent.Add(probeWait)), time.Millisecond)
		} else if !probeDue.IsZero() {
			timeout = max(time.Until(probeDue), time.Millisecond)
		}
		msg, err := ps.ReceiveTimeout(ctx, timeout)
		var nerr interface{ Timeout() bool }
		switch {
		case err != nil && errors.As(err, &nerr) && nerr.Timeout() && ctx.Err() == nil:
		case err != nil:
			return err
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			// Subscribed, or subscribed again after a reconnection: what
			// was published in between is lost, so prove the path again.
			n.r.setNotifying(false)
			probeSent = time.Time{}
			probeDue = time.Now()
		case *redis.Message:
			if m.Payload != n.probeKey {
				n.r.markDirty(m.Payload)
				continue
			}
			if !probeSent.IsZero() {
				probeSent = time.Time{}
				if n.warned {
					n.r.log.Info("Redis keyspace notifications arrive: reading only the streams that got new entries")
					n.warned = false
				}
				n.r.setNotifying(true)
			}
		}
		now := time.Now()
		if !probeSent.IsZero() && now.Sub(probeSent) >= probeWait {
			return errNoNotifications
		}
		if !probeDue.IsZero() && !now.Before(probeDue) {
			if err := n.probe(ctx); err != nil {
				return fmt.Errorf("probing keyspace notifications: %w", err)
			}
			probeSent = now
			// Checked again every sweep, so notifications turned off on a
			// running server are noticed.
			probeDue = now.Add(n.r.cfg.Sweep)
		}
	}
	return ctx.Err()
}

// probe writes and deletes an entry of the relay's own stream, which
// publishes its key on the channel if notifications are on.
func (n *notifier) probe(ctx context.Context) error {
	_, err := n.r.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: n.probeKey, MaxLen: 1, Values: []any{"probe", "1"}})
		pipe.Del(ctx, n.probeKey)
		return nil
	})
	return err
}
