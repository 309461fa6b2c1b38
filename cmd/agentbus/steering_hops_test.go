package main

import (
	"bytes"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// The hops of one steering message, in the order it takes them. Each
// mark is when the benchmark saw the message leave that stage on the
// bus (a plain NATS subscription sees a JetStream publish as the server
// takes it in), so each hop is the time a stage took, waiting included:
//
//	api      POST → command published on AGENTS_COMMANDS
//	worker   command → the commands worker's reply (fetch, transaction, commit)
//	send     reply → steering_message published on AGENTS_SIDECAR_COMMANDS
//	relay    sidecar command → entry read from the session's Redis stream
//
// The hops add up to the total. Beside them, event is reply →
// message_enqueued published on AGENTS_EVENTS, which the delivery
// reaction sends the steering message from.
const (
	hopAPI = iota
	hopWorker
	hopSend
	hopRelay
	hopCount
)

var hopNames = [hopCount + 1]string{"api", "worker", "send", "relay", "event"}

// hopMarks are the times one message passed each stage; zero when not
// seen.
type hopMarks struct {
	posted, command, reply, sidecar, redis, event time.Time
}

// hops returns each hop's duration and the event's, and whether every
// stage was seen.
func (m hopMarks) hops() ([hopCount + 1]time.Duration, bool) {
	marks := []time.Time{m.posted, m.command, m.reply, m.sidecar, m.redis}
	var out [hopCount + 1]time.Duration
	for i := range hopCount {
		if marks[i].IsZero() || marks[i+1].IsZero() {
			return out, false
		}
		out[i] = marks[i+1].Sub(marks[i])
	}
	if m.event.IsZero() {
		return out, false
	}
	out[hopCount] = m.event.Sub(m.reply)
	return out, true
}

// hopClock marks the stages of the messages "Steer n=<n>" from plain NATS
// subscriptions to the subjects they pass.
type hopClock struct {
	mu       sync.Mutex
	marks    map[int]*hopMarks
	commands map[uuid.UUID]int // command id → message number
}

func newHopClock(b *testing.B, nc *nats.Conn) *hopClock {
	c := &hopClock{marks: map[int]*hopMarks{}, commands: map[uuid.UUID]int{}}
	// Every subscription feeds one channel, read by one goroutine, so the
	// marks are taken in the order the messages arrived.
	in := make(chan *nats.Msg, 1<<16)
	marks := map[string]func(m *nats.Msg, at time.Time){}
	sub := func(subject string, mark func(m *nats.Msg, at time.Time)) {
		s, err := nc.ChanSubscribe(subject, in)
		require.NoError(b, err)
		b.Cleanup(func() { _ = s.Unsubscribe() })
		marks[subject] = mark
	}
	sub("agents.cmd.queue.enqueue_message", func(m *nats.Msg, at time.Time) {
		var cmd struct {
			ID   uuid.UUID `json:"id"`
			Data struct {
				Content string `json:"content"`
			} `json:"data"`
		}
		if json.Unmarshal(m.Data, &cmd) != nil {
			return
		}
		n := itemNumber(cmd.Data.Content)
		c.mark(n, func(h *hopMarks) { first(&h.command, at) })
		c.mu.Lock()
		c.commands[cmd.ID] = n
		c.mu.Unlock()
	})
	// The results come back on the api's private inboxes, beside every
	// other reply (JetStream's acks among them).
	sub("_INBOX.>", func(m *nats.Msg, at time.Time) {
		if !bytes.Contains(m.Data, []byte(`"commandId"`)) {
			return
		}
		var r struct {
			CommandID uuid.UUID `json:"commandId"`
		}
		if json.Unmarshal(m.Data, &r) != nil {
			return
		}
		c.mu.Lock()
		n, ok := c.commands[r.CommandID]
		delete(c.commands, r.CommandID)
		c.mu.Unlock()
		if ok {
			c.mark(n, func(h *hopMarks) { first(&h.reply, at) })
		}
	})
	content := func(m *nats.Msg) int {
		var env struct {
			Data struct {
				Content string `json:"content"`
			} `json:"data"`
		}
		if json.Unmarshal(m.Data, &env) != nil {
			return -1
		}
		return itemNumber(env.Data.Content)
	}
	sub("agents.evt.queue.*.message_enqueued", func(m *nats.Msg, at time.Time) {
		c.mark(content(m), func(h *hopMarks) { first(&h.event, at) })
	})
	sub("agents.sidecar.*.commands.steering_message", func(m *nats.Msg, at time.Time) {
		c.mark(content(m), func(h *hopMarks) { first(&h.sidecar, at) })
	})
	go func() {
		for m := range in {
			marks[m.Sub.Subject](m, time.Now())
		}
	}()
	require.NoError(b, nc.Flush())
	return c
}

// first keeps the first time a stage was seen: a message sent again (the
// delivery reaction's copy of a steering message that went out with its
// event, which JetStream drops) is seen again by a plain subscription.
func first(mark *time.Time, at time.Time) {
	if mark.IsZero() {
		*mark = at
	}
}

func (c *hopClock) mark(n int, set func(*hopMarks)) {
	if n < 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.marks[n]
	if h == nil {
		h = &hopMarks{}
		c.marks[n] = h
	}
	set(h)
}

// take returns and forgets the marks of message n.
func (c *hopClock) take(n int) hopMarks {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.marks[n]
	delete(c.marks, n)
	if h == nil {
		return hopMarks{}
	}
	return *h
}
