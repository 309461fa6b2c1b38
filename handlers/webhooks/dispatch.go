package webhooks

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/postgres/queries"
)

// dispatch runs one delivery loop per endpoint with due deliveries, so a
// slow or dead endpoint only ever delays itself. It looks for due
// endpoints when the enqueuer's commit notifies it and every PollInterval
// (retries come due by time), until ctx ends.
func (w *Worker) dispatch(ctx context.Context) error {
	loops := &endpointLoops{running: map[uuid.UUID]*endpointLoop{}}
	defer loops.wait()
	var listener *pgx.Conn
	defer func() {
		if listener != nil {
			_ = listener.Close(context.Background())
		}
	}()
	for ctx.Err() == nil {
		due, err := queries.DueWebhooks(ctx, w.cfg.DB, w.now())
		if err != nil && ctx.Err() == nil {
			w.log.Warn("webhooks: due endpoints", "err", err)
		}
		for _, id := range due {
			loops.kick(ctx, id, w.deliverAll)
		}
		if listener == nil {
			listener = w.listen(ctx)
		}
		if listener == nil {
			sleep(ctx, w.cfg.PollInterval)
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, w.cfg.PollInterval)
		_, err = listener.WaitForNotification(wctx)
		cancel()
		if err != nil && wctx.Err() == nil && ctx.Err() == nil {
			// The connection broke: listen again on a new one.
			_ = listener.Close(context.Background())
			listener = nil
		}
	}
	return nil
}

// listen returns a connection of its own that listens for the enqueuer's
// notifications, or nil (the dispatcher polls until it can listen).
func (w *Worker) listen(ctx context.Context) *pgx.Conn {
	c, err := w.cfg.DB.Acquire(ctx)
	if err != nil {
		return nil
	}
	conn := c.Hijack()
	if _, err := conn.Exec(ctx, "LISTEN "+postgres.WebhookDeliveriesChannel); err != nil {
		_ = conn.Close(context.Background())
		return nil
	}
	return conn
}

// deliverAll attempts the endpoint's due deliveries, one at a time, each
// session's in order, until none is due.
func (w *Worker) deliverAll(ctx context.Context, webhook uuid.UUID) {
	for ctx.Err() == nil {
		d, ok, err := postgres.ClaimWebhookDelivery(ctx, w.cfg.DB, webhook, w.now(), w.cfg.lease())
		if err != nil {
			if ctx.Err() == nil {
				w.log.Warn("webhooks: claim a delivery", "webhook_id", webhook, "err", err)
			}
			return
		}
		if !ok {
			return
		}
		w.deliverOne(ctx, d)
	}
}

// deliverOne makes one attempt of d and records its outcome: delivered, a
// retry at the schedule's next time, or failed.
func (w *Worker) deliverOne(ctx context.Context, d postgres.ClaimedDelivery) {
	o, delivered := w.send.attempt(ctx, d)
	if ctx.Err() != nil {
		return // stopped mid-attempt: the lease runs out and the delivery is taken again
	}
	// The outcome is recorded even as the worker stops: an attempt the
	// receiver saw should not be made again for want of a write.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	w.metrics.attempted(d, o, delivered, w.now())
	if delivered {
		if err := postgres.RecordWebhookDelivered(rctx, w.cfg.DB, d, o); err != nil {
			w.log.Warn("webhooks: record a delivery", "delivery_id", d.ID, "err", err)
		}
		return
	}
	var next *time.Time
	if delay, ok := domain.WebhookRetryDelay(w.cfg.RetrySchedule, d.Attempt, w.random()); ok {
		at := w.now().Add(delay)
		next = &at
	}
	disabled, err := postgres.RecordWebhookAttemptFailed(rctx, w.cfg.DB, d, o, next, w.cfg.DisableAfter)
	if err != nil {
		w.log.Warn("webhooks: record a failed attempt", "delivery_id", d.ID, "err", err)
		return
	}
	if next == nil {
		w.metrics.failed()
		w.log.Warn("webhooks: delivery failed after its last retry", "webhook_id", d.WebhookID, "delivery_id", d.ID,
			"event_id", d.EventID, "err", o.Error)
	}
	if disabled {
		w.metrics.disabled()
		w.log.Warn("webhooks: webhook disabled after deliveries in a row failed", "webhook_id", d.WebhookID,
			"failures", w.cfg.DisableAfter)
	}
}

// endpointLoops are the running delivery loops, one per endpoint at most.
type endpointLoops struct {
	mu      sync.Mutex
	running map[uuid.UUID]*endpointLoop
	wg      sync.WaitGroup
}

type endpointLoop struct {
	// again asks the loop to look once more before it ends: deliveries
	// came due while it was finishing.
	again bool
}

// kick starts the endpoint's loop, or asks the running one to look again.
func (l *endpointLoops) kick(ctx context.Context, id uuid.UUID, run func(context.Context, uuid.UUID)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if loop, ok := l.running[id]; ok {
		loop.again = true
		return
	}
	loop := &endpointLoop{}
	l.running[id] = loop
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			run(ctx, id)
			l.mu.Lock()
			if !loop.again || ctx.Err() != nil {
				delete(l.running, id)
				l.mu.Unlock()
				return
			}
			loop.again = false
			l.mu.Unlock()
		}
	}()
}

func (l *endpointLoops) wait() { l.wg.Wait() }

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
