package bus

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentbus/agentbus/internal/tracing"
)

// Headers of a dead-lettered message, besides the original's own headers.
const (
	// HeaderError carries the handler's last error.
	HeaderError = "Agents-Error"
	// HeaderOriginalSubject carries the subject the message was published on.
	HeaderOriginalSubject = "Agents-Original-Subject"
	// HeaderOriginalStream carries the stream the message came from.
	HeaderOriginalStream = "Agents-Original-Stream"
	// HeaderOriginalSequence carries the message's sequence in that stream.
	HeaderOriginalSequence = "Agents-Original-Sequence"
	// HeaderOriginalMsgID carries the message's Nats-Msg-Id.
	HeaderOriginalMsgID = "Agents-Original-Msg-Id"
	// HeaderConsumer carries the consumer that gave up on the message.
	HeaderConsumer = "Agents-Consumer"
	// HeaderDeliveries carries how many times the message was delivered.
	HeaderDeliveries = "Agents-Deliveries"
)

// maxErrorHeader bounds the Agents-Error header, which holds any error text.
const maxErrorHeader = 1024

// handle runs the handler on m and settles it: ack, nak with backoff, or
// dead letter.
func (r *runner) handle(base context.Context, m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		// Not a JetStream delivery; nothing to settle it with.
		r.logger.Error("message without metadata", "subject", m.Subject(), "err", err)
		return
	}
	p := r.policy.Load()
	log := r.logger.With("subject", m.Subject(), "seq", md.Sequence.Stream, "delivery", md.NumDelivered)

	// Deliveries beyond the handler attempts happen only when the handler
	// never returned (the process died on the message): do not try again.
	if int(md.NumDelivered) > p.attempts {
		r.deadLetter(m, md, p, fmt.Errorf("bus: no handler result after %d deliveries", md.NumDelivered-1), log)
		return
	}

	err = r.attempt(base, m, md, p, log)
	attempt := md.NumDelivered
	if r.cfg.RetryInOrder && r.cfg.OrderKey != nil {
		// The lane waits for the message: the messages of its key behind
		// it must not overtake it. An error still unavailable after the
		// attempt means Run is stopping.
		for ; err != nil && !IsPermanent(err) && !IsUnavailable(err) && int(attempt) < p.attempts; attempt++ {
			delay := p.delay(attempt)
			log.Warn("handler failed, retrying in order", "err", err, "retry_in", delay)
			if !r.holdInProgress(base, []jetstream.Msg{m}, p.ackDeadline(md.NumDelivered), delay) {
				break
			}
			err = r.attempt(base, m, md, p, log)
		}
	}
	r.settle(m, md, p, err, attempt, log)
}

// attempt runs the handler on m as one attempt. While the handler fails
// because a server it depends on is unavailable (a database restart), m
// is held, kept alive on the server, and the handler runs again after a
// growing pause: an outage, however long, spends none of m's attempts,
// which would otherwise run out within the retry schedule. Only Run
// stopping ends the wait; the unavailable error is then returned.
func (r *runner) attempt(base context.Context, m jetstream.Msg, md *jetstream.MsgMetadata, p *policy, log *slog.Logger) error {
	var pause time.Duration
	for {
		err := r.runHandler(base, m, md, p)
		if !IsUnavailable(err) {
			return err
		}
		pause = r.outageWait(pause, err, 1, log)
		if !r.holdInProgress(r.stopping, []jetstream.Msg{m}, p.ackDeadline(md.NumDelivered), pause) {
			return err
		}
	}
}

// outageWait is the pause before running a handler again after it found
// its servers unavailable, the pause before being before (zero at first).
// The first one of a hold is logged as a warning, the rest for debugging:
// an outage holds many messages at once.
func (r *runner) outageWait(before time.Duration, err error, messages int, log *slog.Logger) time.Duration {
	pause := nextOutageWait(before)
	level := slog.LevelDebug
	if before == 0 {
		level = slog.LevelWarn
	}
	log.Log(context.Background(), level, "handler's servers unavailable, holding the message and retrying in place",
		"err", err, "retry_in", pause, "messages", messages)
	return pause
}

// settle acknowledges m when its handler succeeded, dead-letters it when
// the error is permanent or its attempts are used up, and otherwise hands
// it back for a redelivery after its backoff.
func (r *runner) settle(m jetstream.Msg, md *jetstream.MsgMetadata, p *policy, err error, attempt uint64, log *slog.Logger) {
	switch {
	case err == nil:
		if err := m.Ack(); err != nil {
			log.Warn("ack failed; the message will be redelivered", "err", err)
		}
	case IsPermanent(err) || int(attempt) >= p.attempts && !IsUnavailable(err):
		// An unavailable error here means Run stopped while the handler
		// waited for its servers: that is not the message's fault.
		r.deadLetter(m, md, p, err, log)
	default:
		delay := p.delay(md.NumDelivered)
		log.Warn("handler failed, redelivering", "err", err, "retry_in", delay)
		if err := m.NakWithDelay(delay); err != nil {
			log.Warn("nak failed; the message will be redelivered after its ack wait", "err", err)
		}
	}
}

// holdInProgress waits d while telling the server the messages are still
// being worked on; false when base ended first.
func (r *runner) holdInProgress(base context.Context, msgs []jetstream.Msg, ackDeadline, d time.Duration) bool {
	wait := time.NewTimer(d)
	defer wait.Stop()
	tick := time.NewTicker(max(ackDeadline/3, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-base.Done():
			return false
		case <-wait.C:
			return true
		case <-tick.C:
			r.reportProgress(msgs)
		}
	}
}

func (r *runner) reportProgress(msgs []jetstream.Msg) {
	for _, m := range msgs {
		if err := m.InProgress(); err != nil {
			r.logger.Debug("progress report failed", "subject", m.Subject(), "err", err)
		}
	}
}

// whileRunning reports progress on msgs three times per ack deadline,
// which leaves room for one report to be late, until the returned stop is
// called. A timer does it, not a goroutine of its own: most handlers
// return long before the first report, and then neither starting nor
// stopping it waits for the scheduler.
func (r *runner) whileRunning(msgs []jetstream.Msg, ackDeadline time.Duration) (stop func()) {
	every := max(ackDeadline/3, 10*time.Millisecond)
	var (
		mu      sync.Mutex
		stopped bool
		timer   *time.Timer
	)
	mu.Lock()
	defer mu.Unlock()
	timer = time.AfterFunc(every, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		r.reportProgress(msgs)
		timer.Reset(every)
	})
	return func() {
		// Once stop holds the lock, no report is under way or follows:
		// the messages are settled after the last one, which would
		// otherwise race with the ack.
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		timer.Stop()
	}
}

// runHandler calls the handler, reporting progress to the server while it
// runs and turning a panic into an error.
func (r *runner) runHandler(base context.Context, m jetstream.Msg, md *jetstream.MsgMetadata, p *policy) (err error) {
	ctx, span := r.startSpan(base, m, md)
	defer func() {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "handler failed")
		}
		span.End()
	}()

	defer r.whileRunning([]jetstream.Msg{m}, p.ackDeadline(md.NumDelivered))()

	defer func() {
		if v := recover(); v != nil {
			r.logger.Error("handler panicked", "subject", m.Subject(), "panic", v, "stack", string(debug.Stack()))
			err = fmt.Errorf("bus: handler panicked: %v", v)
		}
	}()
	return r.cfg.Handler(ctx, m)
}

// startSpan starts the span of handling m, which continues the trace the
// message carries, so that what the handler publishes carries it on.
func (r *runner) startSpan(base context.Context, m jetstream.Msg, md *jetstream.MsgMetadata) (context.Context, trace.Span) {
	return tracing.Tracer().Start(tracing.WithTraceparent(base, m.Headers().Get(HeaderTraceparent)),
		"process "+r.cfg.Consumer, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.destination.name", m.Subject()),
			attribute.String("messaging.consumer.group.name", r.cfg.Consumer),
			attribute.Int64("messaging.nats.stream.sequence", int64(md.Sequence.Stream)),
			attribute.Int64("messaging.nats.delivery", int64(md.NumDelivered))))
}

// deadLetter publishes a copy of m to agents.dlq.<consumer> and terminates
// m. When the copy cannot be stored, m is redelivered instead: nothing is
// dropped.
func (r *runner) deadLetter(m jetstream.Msg, md *jetstream.MsgMetadata, p *policy, cause error, log *slog.Logger) {
	dl := nats.NewMsg(DLQSubject(r.cfg.Consumer))
	dl.Data = m.Data()
	for k, v := range m.Headers() {
		// Nats-* headers steer JetStream (ids, expectations, batches); the
		// copy must not inherit them.
		if !strings.HasPrefix(strings.ToLower(k), "nats-") {
			dl.Header[k] = v
		}
	}
	// Several consumers may dead-letter the same message: the copy's id is
	// per consumer, and the same for every attempt of this one.
	dl.Header.Set(HeaderMsgID, r.cfg.Consumer+":"+md.Stream+":"+strconv.FormatUint(md.Sequence.Stream, 10))
	if id := m.Headers().Get(HeaderMsgID); id != "" {
		dl.Header.Set(HeaderOriginalMsgID, id)
	}
	dl.Header.Set(HeaderError, headerValue(cause.Error()))
	dl.Header.Set(HeaderOriginalSubject, m.Subject())
	dl.Header.Set(HeaderOriginalStream, md.Stream)
	dl.Header.Set(HeaderOriginalSequence, strconv.FormatUint(md.Sequence.Stream, 10))
	dl.Header.Set(HeaderConsumer, r.cfg.Consumer)
	dl.Header.Set(HeaderDeliveries, strconv.FormatUint(md.NumDelivered, 10))

	ctx, cancel := context.WithTimeout(context.Background(), r.js.Options().DefaultTimeout)
	defer cancel()
	if _, err := PublishMsg(ctx, r.js, dl); err != nil {
		delay := p.delay(md.NumDelivered)
		log.Error("dead letter not stored, redelivering", "dlq", dl.Subject, "cause", cause, "err", err, "retry_in", delay)
		if err := m.NakWithDelay(delay); err != nil {
			log.Warn("nak failed; the message will be redelivered after its ack wait", "err", err)
		}
		return
	}
	if err := m.TermWithReason(headerValue(cause.Error())); err != nil {
		// The copy is stored; a redelivery dead-letters it again under the
		// same id, which the DLQ stream drops as a duplicate.
		log.Warn("term failed", "err", err)
	}
	log.Warn("message dead-lettered", "dlq", dl.Subject, "err", cause)
}

// headerValue makes s a single-line header value of bounded length.
func headerValue(s string) string {
	s = strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
	if len(s) > maxErrorHeader {
		s = strings.ToValidUTF8(s[:maxErrorHeader], "")
	}
	return s
}
