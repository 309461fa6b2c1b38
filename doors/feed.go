package doors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/feed"
)

// Item is one item of a session's live feed, as the SSE stream carries
// it: its resumable id, its event name and its payload.
type Item struct {
	// Seq is the item's position in AGENTS_EVENTS, its SSE id: a client
	// that resumes after it misses nothing and gets nothing twice.
	Seq uint64
	// Event is the SSE event name: "event" for a domain event, else the
	// feed item's kind (feed.Kinds).
	Event string
	// Type is the domain event's type, or the feed item's kind.
	Type string
	// Data is the domain event's payload, or the feed item.
	Data json.RawMessage
	// At is when it happened.
	At time.Time
}

// EventDomain is the Event of domain events.
const EventDomain = "event"

// Feed follows one session's live feed.
type Feed interface {
	// Follow calls deliver with each item of the session's feed after
	// position after (0: from its beginning), in order, until ctx ends,
	// deliver fails, or the feed cannot be read.
	Follow(ctx context.Context, sessionID uuid.UUID, after uint64, deliver func(Item) error) error
}

// JetStreamFeed reads the feed from AGENTS_EVENTS, as the SSE stream
// does: agents.evt.<aggregate>.<sessionId>.> for each aggregate.
type JetStreamFeed struct {
	JS jetstream.JetStream
	// Aggregates make up a session's feed; default session, queue,
	// activity (api.Config.SessionStreamAggregates).
	Aggregates []string
	// Buffer is how many items are pulled ahead of the client; default 256.
	Buffer int
}

// Follow reads with an ordered consumer: ephemeral, at the client's pace
// (a slow client holds back nothing but itself), recreated by the client
// library on any gap, so items come in stream order without holes.
func (f JetStreamFeed) Follow(ctx context.Context, sessionID uuid.UUID, after uint64, deliver func(Item) error) error {
	aggs := f.Aggregates
	if len(aggs) == 0 {
		aggs = []string{"session", "queue", feed.Aggregate}
	}
	buffer := f.Buffer
	if buffer <= 0 {
		buffer = 256
	}
	subjects := make([]string, 0, len(aggs))
	for _, agg := range aggs {
		subjects = append(subjects, bus.InstanceEventsFilter(agg, sessionID.String()))
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: subjects, DeliverPolicy: jetstream.DeliverAllPolicy}
	if after > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, after+1
	}
	cons, err := f.JS.OrderedConsumer(ctx, bus.StreamEvents, cfg)
	if err != nil {
		return fmt.Errorf("doors: open the feed of %s: %w", sessionID, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(buffer))
	if err != nil {
		return fmt.Errorf("doors: read the feed of %s: %w", sessionID, err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return ctx.Err()
			}
			return fmt.Errorf("doors: feed of %s: %w", sessionID, err)
		}
		md, err := msg.Metadata()
		if err != nil {
			continue
		}
		var env bus.Envelope
		if json.Unmarshal(msg.Data(), &env) != nil {
			continue // the SSE stream skips it too
		}
		if err := deliver(ItemOf(md.Sequence.Stream, env)); err != nil {
			return err
		}
	}
}

// ItemOf is the feed item of an envelope at seq.
func ItemOf(seq uint64, env bus.Envelope) Item {
	it := Item{Seq: seq, Event: EventDomain, Type: env.Type, Data: env.Data, At: env.OccurredAt}
	if env.Aggregate == feed.Aggregate {
		it.Event = env.Type
	}
	if len(it.Data) == 0 {
		it.Data = json.RawMessage("{}")
	}
	return it
}
