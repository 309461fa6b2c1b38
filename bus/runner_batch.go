package bus

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/codes"
)

// batchItem is one message of a batch with what settling it needs.
type batchItem struct {
	m   jetstream.Msg
	md  *jetstream.MsgMetadata
	log *slog.Logger
	// attempt is the handler attempt the message's last result came from.
	attempt uint64
}

// handleBatch runs the batch handler on msgs and settles each message by
// its own result. With RetryInOrder, the first failed message is retried
// after its backoff together with everything behind it in the batch, so
// that no message of its key is settled before it.
func (r *runner) handleBatch(base context.Context, msgs []jetstream.Msg) {
	p := r.policy.Load()
	items := r.batchItems(msgs, p)
	if len(items) == 0 {
		return
	}
	inOrder := r.cfg.RetryInOrder && r.cfg.OrderKey != nil
	errs := r.batchAttempt(base, items, p, inOrder)
	for start := 0; start < len(items); {
		if !inOrder {
			r.settleAll(items[start:], errs[start:], p)
			return
		}
		failed := start
		for failed < len(items) && errs[failed] == nil {
			r.settle(items[failed].m, items[failed].md, p, nil, items[failed].attempt, items[failed].log)
			failed++
		}
		if failed == len(items) {
			return
		}
		it := items[failed]
		if IsUnavailable(errs[failed]) {
			// Run stopped while the batch waited for its servers: the
			// rest is settled by its last results, as below.
			r.settleAll(items[failed:], errs[failed:], p)
			return
		}
		if IsPermanent(errs[failed]) || int(it.attempt) >= p.attempts {
			r.settle(it.m, it.md, p, errs[failed], it.attempt, it.log)
			start = failed + 1
			continue
		}
		// The lane waits for the message: the messages of its key behind
		// it must not overtake it, so they wait with it and run again
		// (handlers are idempotent).
		rest := items[failed:]
		delay := p.delay(it.attempt)
		it.log.Warn("handler failed, retrying in order", "err", errs[failed], "retry_in", delay, "behind", len(rest)-1)
		if !r.holdInProgress(base, msgsOf(rest), p.ackDeadline(it.md.NumDelivered), delay) {
			r.settleAll(rest, errs[failed:], p)
			return
		}
		for i := range rest {
			rest[i].attempt++
		}
		copy(errs[failed:], r.batchAttempt(base, rest, p, inOrder))
		start = failed
	}
}

// batchItems are the messages of msgs to run the handler on. A message
// delivered beyond the handler attempts is dead-lettered instead: its
// handler never returned (see handle).
func (r *runner) batchItems(msgs []jetstream.Msg, p *policy) []batchItem {
	items := make([]batchItem, 0, len(msgs))
	for _, m := range msgs {
		md, err := m.Metadata()
		if err != nil {
			r.logger.Error("message without metadata", "subject", m.Subject(), "err", err)
			continue
		}
		log := r.logger.With("subject", m.Subject(), "seq", md.Sequence.Stream, "delivery", md.NumDelivered)
		if int(md.NumDelivered) > p.attempts {
			r.deadLetter(m, md, p, fmt.Errorf("bus: no handler result after %d deliveries", md.NumDelivered-1), log)
			continue
		}
		items = append(items, batchItem{m: m, md: md, log: log, attempt: md.NumDelivered})
	}
	return items
}

func (r *runner) settleAll(items []batchItem, errs []error, p *policy) {
	for i, it := range items {
		r.settle(it.m, it.md, p, errs[i], it.attempt, it.log)
	}
}

// batchAttempt runs the batch handler on items as one attempt. The
// messages whose handler found its servers unavailable are then held,
// kept alive on the server, and run again after a growing pause (with
// RetryInOrder, every message behind the first of them too), until none
// is left or Run stops: an outage spends none of their attempts (see
// attempt).
func (r *runner) batchAttempt(base context.Context, items []batchItem, p *policy, inOrder bool) []error {
	errs := r.runBatch(base, items, p)
	var pause time.Duration
	for {
		again := unavailableItems(errs, inOrder)
		if len(again) == 0 {
			return errs
		}
		held := make([]batchItem, len(again))
		for k, i := range again {
			held[k] = items[i]
		}
		pause = r.outageWait(pause, errs[again[0]], len(held), held[0].log)
		if !r.holdInProgress(r.stopping, msgsOf(held), p.ackDeadline(held[0].md.NumDelivered), pause) {
			return errs
		}
		for k, err := range r.runBatch(base, held, p) {
			errs[again[k]] = err
		}
	}
}

// unavailableItems are the indexes of the messages a batch attempt runs
// again: those whose servers were unavailable and, in order, every one
// behind the first of them.
func unavailableItems(errs []error, inOrder bool) []int {
	var again []int
	for i, err := range errs {
		if IsUnavailable(err) || inOrder && len(again) > 0 {
			again = append(again, i)
		}
	}
	return again
}

func msgsOf(items []batchItem) []jetstream.Msg {
	msgs := make([]jetstream.Msg, len(items))
	for i, it := range items {
		msgs[i] = it.m
	}
	return msgs
}

// runBatch calls the batch handler, reporting progress on every message
// while it runs and turning a panic, or a result of the wrong length,
// into an error for each message.
func (r *runner) runBatch(base context.Context, items []batchItem, p *policy) (errs []error) {
	batch := make([]Delivery, len(items))
	ends := make([]func(error), len(items))
	for i, it := range items {
		ctx, span := r.startSpan(base, it.m, it.md)
		batch[i] = Delivery{Ctx: ctx, Msg: it.m}
		ends[i] = func(err error) {
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, "handler failed")
			}
			span.End()
		}
	}
	defer func() {
		for i, end := range ends {
			end(errs[i])
		}
	}()
	defer r.whileRunning(msgsOf(items), p.ackDeadline(items[0].md.NumDelivered))()
	defer func() {
		if v := recover(); v != nil {
			r.logger.Error("handler panicked", "subject", items[0].m.Subject(), "messages", len(items), "panic", v, "stack", string(debug.Stack()))
			errs = fill(len(items), fmt.Errorf("bus: handler panicked: %v", v))
		}
	}()
	errs = r.cfg.BatchHandler(base, batch)
	if len(errs) != len(items) {
		errs = fill(len(items), fmt.Errorf("bus: batch handler returned %d results for %d messages", len(errs), len(items)))
	}
	return errs
}

func fill(n int, err error) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}
