package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentbus/agentbus/sidecar/protocol"
)

// inbox holds the command entries the sidecar took and has not answered
// yet, under protocol.InboxKey: a steering message until it is delivered
// to the agent, a stop, pause or interrupt until it is acknowledged. The
// cursor moves past an entry only once the inbox holds it, and an entry
// leaves only once its answer is written, so a sidecar that is killed or
// suspended in between hands the entry to the next one instead of losing
// it (a steering message would stay pending for good, a cancel would wait
// for an ack forever).
type inbox struct {
	rdb *redis.Client
	key string
	log *slog.Logger

	mu      sync.Mutex
	entries []inboxEntry // in stream order
}

// inboxEntry is a command entry as read from the stream, with the answer
// that settles it.
type inboxEntry struct {
	ID     string            `json:"id"`
	Fields map[string]string `json:"fields"`
	Answer string            `json:"answer"`
}

func newInbox(rdb *redis.Client, sessionID string, log *slog.Logger) *inbox {
	return &inbox{rdb: rdb, key: protocol.InboxKey(sessionID), log: log}
}

// answerOf names the event that answers a command entry: the delivery of
// a steering message, the ack of a control; "" for the commands answered
// as they are handled.
func answerOf(e protocol.Entry) string {
	if e.Type == protocol.CommandSteeringMessage {
		var m protocol.SteeringMessage
		if json.Unmarshal(e.Data, &m) != nil || m.MessageID == "" {
			return ""
		}
		return delivered(m.MessageID)
	}
	if ack, ok := protocol.AckedAtRest[e.Type]; ok {
		return acked(ack, e.CommandID)
	}
	return ""
}

func delivered(messageID string) string { return protocol.EventMessageDelivered + ":" + messageID }

func acked(ackType, commandID string) string {
	if commandID == "" {
		return ""
	}
	return ackType + ":" + commandID
}

// answerIn names the answer an event of the session's stream is, if any.
func answerIn(fields map[string]any) string {
	typ, _ := fields[protocol.FieldType].(string)
	raw, _ := fields[protocol.FieldData].(string)
	var d struct {
		MessageID string `json:"message_id"`
		CommandID string `json:"command_id"`
	}
	if json.Unmarshal([]byte(raw), &d) != nil {
		return ""
	}
	if typ == protocol.EventMessageDelivered {
		return delivered(d.MessageID)
	}
	for _, ack := range protocol.AckedAtRest {
		if typ == ack {
			return acked(typ, d.CommandID)
		}
	}
	return ""
}

// take keeps m until its answer is written, when it needs one.
func (b *inbox) take(m redis.XMessage) {
	e, err := protocol.ParseEntry(m.ID, m.Values)
	if err != nil {
		return
	}
	answer := answerOf(e)
	if answer == "" {
		return
	}
	fields := make(map[string]string, len(m.Values))
	for k, v := range m.Values {
		if s, ok := v.(string); ok {
			fields[k] = s
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.entries = append(b.entries, inboxEntry{ID: m.ID, Fields: fields, Answer: answer})
	b.saveLocked()
}

// answered drops the entries the answer settles, once it is written.
func (b *inbox) answered(answer string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	kept := b.entries[:0]
	for _, e := range b.entries {
		if e.Answer != answer {
			kept = append(kept, e)
		}
	}
	if len(kept) == len(b.entries) {
		return
	}
	b.entries = kept
	b.saveLocked()
}

// saveLocked writes the inbox; its own context, since an answer may be
// written as the session is being torn down.
func (b *inbox) saveLocked() {
	raw, err := json.Marshal(b.entries)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.rdb.Set(ctx, b.key, raw, 0).Err(); err != nil {
		b.log.Warn("inbox not stored: a restart may miss a command taken", "error", err)
	}
}

// load reads the inbox a predecessor left and returns its entries whose
// answer the session's event stream does not hold: the predecessor may
// have written an answer and died before it dropped the entry. When the
// stream ends with session_end, the predecessor's run is over (this
// sidecar runs the session again after a retry): its stop, pause or
// interrupt belongs to that run and is dropped, while a message it did
// not deliver is still for the agent.
func (b *inbox) load(ctx context.Context, eventsKey string) ([]redis.XMessage, error) {
	raw, err := b.rdb.Get(ctx, b.key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the inbox: %w", err)
	}
	var entries []inboxEntry
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("read the inbox: %w", err)
	}
	if len(entries) == 0 {
		return nil, nil
	}
	written, ended, err := answersIn(ctx, b.rdb, eventsKey)
	if err != nil {
		return nil, err
	}
	var out []redis.XMessage
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range entries {
		if written[e.Answer] || ended && !strings.HasPrefix(e.Answer, protocol.EventMessageDelivered+":") {
			continue
		}
		b.entries = append(b.entries, e)
		values := make(map[string]any, len(e.Fields))
		for k, v := range e.Fields {
			values[k] = v
		}
		out = append(out, redis.XMessage{ID: e.ID, Values: values})
	}
	b.saveLocked()
	return out, nil
}

// answersIn reads the answers the session's event stream holds, and
// whether its last event is session_end.
func answersIn(ctx context.Context, rdb *redis.Client, key string) (answers map[string]bool, ended bool, err error) {
	answers = map[string]bool{}
	cursor := "0"
	for {
		res, err := rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{key, cursor}, Count: 1000, Block: -1}).Result()
		if errors.Is(err, redis.Nil) {
			return answers, ended, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("read the answers written: %w", err)
		}
		n := 0
		for _, s := range res {
			for _, m := range s.Messages {
				n++
				cursor = m.ID
				if a := answerIn(m.Values); a != "" {
					answers[a] = true
				}
				ended = m.Values[protocol.FieldType] == protocol.EventSessionEnd
			}
		}
		if n < 1000 {
			return answers, ended, nil
		}
	}
}
