package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentbus/agentbus/sidecar/protocol"
)

// ErrSessionEnded is returned when an event is written after session_end.
var ErrSessionEnded = errors.New("session ended")

// emitter appends events to a session's event stream, one at a time and in
// order. Once it wrote session_end it writes nothing more, so session_end
// is always a session's last event.
type emitter struct {
	rdb     *redis.Client
	key     string
	timeout time.Duration // how long one event may keep failing

	// quit, once closed, stops retries: a suspended sidecar does not wait
	// for a Redis that may be gone with its runtime.
	quit     chan struct{}
	quitOnce sync.Once

	mu    sync.Mutex
	ended bool
	end   protocol.SessionEnd

	// traces holds the traceparent of commands not answered yet, by
	// command id (and by message id for a steering message), so the
	// event answering one continues its trace.
	tracesMu sync.Mutex
	traces   map[string]string
}

// maxTraces bounds the traceparents held for commands whose answer has
// not come (yet): beyond it they are forgotten, which only cuts traces.
const maxTraces = 1024

// traceAnswers makes the next event answering the command (or the
// steering message) id carry the traceparent tp.
func (e *emitter) traceAnswers(id, tp string) {
	if id == "" || tp == "" {
		return
	}
	e.tracesMu.Lock()
	defer e.tracesMu.Unlock()
	if e.traces == nil || len(e.traces) >= maxTraces {
		e.traces = map[string]string{}
	}
	e.traces[id] = tp
}

// traceOf returns, and forgets, the traceparent of the command that the
// event whose data is raw answers: the command_id an ack echoes, or the
// message_id of a message_delivered.
func (e *emitter) traceOf(raw string) string {
	e.tracesMu.Lock()
	defer e.tracesMu.Unlock()
	if len(e.traces) == 0 {
		return ""
	}
	var answer struct {
		CommandID string `json:"command_id"`
		MessageID string `json:"message_id"`
	}
	if json.Unmarshal([]byte(raw), &answer) != nil {
		return ""
	}
	for _, id := range []string{answer.CommandID, answer.MessageID} {
		if tp, ok := e.traces[id]; ok && id != "" {
			delete(e.traces, id)
			return tp
		}
	}
	return ""
}

// abandon makes writes give up at their first failure from now on.
func (e *emitter) abandon() { e.quitOnce.Do(func() { close(e.quit) }) }

// emit writes one event. Writes use their own context: an event is written
// even while the session is being torn down.
func (e *emitter) emit(ev protocol.Event) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended {
		return ErrSessionEnded
	}
	return e.write(ev)
}

// finish writes the final events (acks, then session_end) unless another
// caller ended the session first; it reports whether it did.
func (e *emitter) finish(end protocol.SessionEnd, before ...protocol.Event) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended {
		return false, nil
	}
	e.ended, e.end = true, end
	for _, ev := range before {
		if err := e.write(ev); err != nil {
			return true, err
		}
	}
	return true, e.write(end)
}

// final returns the session_end written, once there is one.
func (e *emitter) final() (protocol.SessionEnd, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.end, e.ended
}

// write appends ev, retrying while Redis fails, for up to e.timeout.
func (e *emitter) write(ev protocol.Event) error {
	deadline := time.Now().Add(e.timeout)
	backoff := 50 * time.Millisecond
	tp := ""
	for attempt := 0; ; attempt++ {
		values, err := protocol.EventValues(ev, time.Now())
		if err != nil {
			return err
		}
		if attempt == 0 {
			tp = e.traceOf(values[3].(string))
		}
		if tp != "" {
			values = append(values, protocol.FieldTraceparent, tp)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = e.rdb.XAdd(ctx, &redis.XAddArgs{Stream: e.key, Values: values}).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().Add(backoff).After(deadline) {
			return fmt.Errorf("write %s: %w", ev.EventType(), err)
		}
		select {
		case <-e.quit:
			return fmt.Errorf("write %s: %w", ev.EventType(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}
