package main

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
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
//
// The worker and relay hops are split further by what the same
// subscription sees of JetStream: the publish's ack (the message is
// stored and fsynced) and the message's delivery to the consumer's pull
// inbox. Each part is measured from the publish:
//
//	cmd-stored       command published → its publish acknowledged
//	cmd-delivered    command published → delivered to the commands worker
//	worker-run       delivered → reply (the handler's own work)
//	sc-stored        steering message published → acknowledged
//	sc-delivered     steering message published → delivered to the relay
//	relay-write      delivered → entry read from Redis
const (
	hopAPI = iota
	hopWorker
	hopSend
	hopRelay
	hopCount
)

var hopNames = [hopCount + 1]string{"api", "worker", "send", "relay", "event"}

// The parts of the worker and relay hops, as named above.
const (
	partCmdStored = iota
	partCmdDelivered
	partWorkerRun
	partSidecarStored
	partSidecarDelivered
	partRelayWrite
	partCount
)

var partNames = [partCount]string{"cmd-stored", "cmd-delivered", "worker-run", "sc-stored", "sc-delivered", "relay-write"}

// hopMarks are the times one message passed each stage; zero when not
// seen.
type hopMarks struct {
	posted, command, reply, sidecar, redis, event time.Time
	// The acks of the command's and steering message's publishes, and
	// their deliveries to the commands worker and the relay.
	commandStored, commandDelivered, sidecarStored, sidecarDelivered time.Time
}

// parts returns the parts of the worker and relay hops, and whether every
// mark they need was seen.
func (m hopMarks) parts() ([partCount]time.Duration, bool) {
	spans := [partCount][2]time.Time{
		{m.command, m.commandStored}, {m.command, m.commandDelivered}, {m.commandDelivered, m.reply},
		{m.sidecar, m.sidecarStored}, {m.sidecar, m.sidecarDelivered}, {m.sidecarDelivered, m.redis},
	}
	var out [partCount]time.Duration
	for i, s := range spans {
		if s[0].IsZero() || s[1].IsZero() {
			return out, false
		}
		out[i] = s[1].Sub(s[0])
	}
	return out, true
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
	// The publish acks and the deliveries meet by stream sequence,
	// whichever the subscription sees first: acked holds the time of an
	// ack not yet matched, delivered the message number of a delivery.
	acked     map[streamSeq]time.Time
	delivered map[streamSeq]int
}

type streamSeq struct {
	stream string
	seq    uint64
}

// The streams whose publish acks and deliveries are marked.
const (
	markedCommands = "AGENTS_COMMANDS"
	markedSidecar  = "AGENTS_SIDECAR_COMMANDS"
)

// storedMark is where a publish ack of a marked stream is kept.
func storedMark(stream string) func(*hopMarks) *time.Time {
	if stream == markedCommands {
		return func(h *hopMarks) *time.Time { return &h.commandStored }
	}
	return func(h *hopMarks) *time.Time { return &h.sidecarStored }
}

// ackedSeq reads the stream and sequence from a delivery's ack subject,
// $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.… (or with the
// domain and account hash after ACK).
func ackedSeq(reply string) (streamSeq, bool) {
	tokens := strings.Split(reply, ".")
	if len(tokens) < 9 || tokens[0] != "$JS" || tokens[1] != "ACK" {
		return streamSeq{}, false
	}
	at := 2
	if len(tokens) >= 12 {
		at = 4
	}
	seq, err := strconv.ParseUint(tokens[at+3], 10, 64)
	return streamSeq{tokens[at], seq}, err == nil
}

// inbox marks what arrives on the private inboxes: a command's result,
// a publish ack, a delivery to a pull consumer.
func (c *hopClock) inbox(m *nats.Msg, at time.Time, content func(*nats.Msg) int) {
	switch {
	case strings.HasPrefix(m.Reply, "$JS.ACK."):
		key, ok := ackedSeq(m.Reply)
		if !ok || (key.stream != markedCommands && key.stream != markedSidecar) {
			return
		}
		// Every delivery is remembered, an unmarked one (n < 0) too, so
		// that its ack finds it and is not kept.
		n := content(m)
		c.mu.Lock()
		stored, ok := c.acked[key]
		delete(c.acked, key)
		if !ok {
			c.delivered[key] = n
		}
		c.mu.Unlock()
		if n < 0 {
			return
		}
		c.mark(n, func(h *hopMarks) {
			if key.stream == markedCommands {
				first(&h.commandDelivered, at)
			} else {
				first(&h.sidecarDelivered, at)
			}
			if ok {
				first(storedMark(key.stream)(h), stored)
			}
		})
	case bytes.Contains(m.Data, []byte(`"commandId"`)):
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
	case bytes.Contains(m.Data, []byte(`"seq"`)):
		var ack struct {
			Stream string `json:"stream"`
			Seq    uint64 `json:"seq"`
		}
		if json.Unmarshal(m.Data, &ack) != nil || (ack.Stream != markedCommands && ack.Stream != markedSidecar) {
			return
		}
		key := streamSeq{ack.Stream, ack.Seq}
		c.mu.Lock()
		n, ok := c.delivered[key]
		delete(c.delivered, key)
		if !ok {
			c.acked[key] = at
		}
		c.mu.Unlock()
		if ok && n >= 0 {
			c.mark(n, func(h *hopMarks) { first(storedMark(key.stream)(h), at) })
		}
	}
}

func newHopClock(b *testing.B, nc *nats.Conn) *hopClock {
	c := &hopClock{marks: map[int]*hopMarks{}, commands: map[uuid.UUID]int{},
		acked: map[streamSeq]time.Time{}, delivered: map[streamSeq]int{}}
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
	// The results come back on the api's private inboxes, beside every
	// other reply: the publish acks, and the deliveries to pull consumers.
	sub("_INBOX.>", func(m *nats.Msg, at time.Time) { c.inbox(m, at, content) })
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
	markIn(&c.mu, c.marks, n, set)
}

// take returns and forgets the marks of message n.
func (c *hopClock) take(n int) hopMarks { return takeFrom(&c.mu, c.marks, n) }

// markIn sets stages of message n in marks, which mu guards.
func markIn[T any](mu *sync.Mutex, marks map[int]*T, n int, set func(*T)) {
	mu.Lock()
	defer mu.Unlock()
	h := marks[n]
	if h == nil {
		h = new(T)
		marks[n] = h
	}
	set(h)
}

// takeFrom returns and forgets the marks of message n in marks, which mu
// guards; zero when none were set.
func takeFrom[T any](mu *sync.Mutex, marks map[int]*T, n int) T {
	mu.Lock()
	defer mu.Unlock()
	h := marks[n]
	delete(marks, n)
	if h == nil {
		var zero T
		return zero
	}
	return *h
}
