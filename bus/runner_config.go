package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Handler handles one message delivered by Run. The contract:
//
//   - it returns nil: the message is acknowledged and not delivered again;
//   - it returns an error: the message is negatively acknowledged and
//     redelivered after the backoff for its delivery count;
//   - it returns an error that says a server it depends on is unavailable
//     (IsUnavailable: Postgres, NATS or a connection down or restarting):
//     the message is held, kept alive on the server, and the handler runs
//     again in place after a growing pause (250ms up to 5s) until it
//     returns something else or Run stops; an outage spends none of the
//     message's attempts;
//   - it returns Permanent(err), or fails on the last allowed delivery: the
//     message is terminated and a copy goes to agents.dlq.<consumer> with the
//     error in the Agents-Error header, and the runner goes on;
//   - it panics: that counts as an error.
//
// Delivery is at least once, so a handler must be idempotent, keyed by the
// message id. While it runs, Run tells the server it is still working
// (InProgress) so a long handler is not redelivered elsewhere. ctx carries the
// message's traceparent and is not cancelled when Run's context ends, only
// RunnerConfig.ShutdownTimeout later.
type Handler func(ctx context.Context, m jetstream.Msg) error

// Delivery is one message of a batch, with the context its handling runs
// in: it carries the message's trace.
type Delivery struct {
	Ctx context.Context
	Msg jetstream.Msg
}

// BatchHandler handles the messages waiting in one lane at once, in the
// order they arrived: with an OrderKey, a key's messages in a batch are in
// stream order, and no later message of the key is handed out before the
// batch returns. It returns one error per message, each settled as a
// Handler's result would be (nil: acknowledged; an error: redelivered;
// Permanent: dead-lettered), so a message is acknowledged only when its
// own result says so. A panic counts as an error for every message.
//
// Writing a batch together lets a key's events that piled up while its
// previous write was under way share one write, instead of queueing one
// write each.
type BatchHandler func(ctx context.Context, batch []Delivery) []error

// RunnerConfig configures Run.
type RunnerConfig struct {
	// Stream is the stream the consumer reads. Required.
	Stream string
	// Consumer is the durable consumer's name, derived from the handler's
	// stable name (acl, pool, delivery). Required.
	//
	// Renaming it creates a new consumer that consumes the stream again
	// from its first message and leaves the old one behind (on a work queue
	// the new one is refused while the old one exists): choose it once.
	Consumer string
	// Handler handles each message. It or BatchHandler is required.
	Handler Handler
	// BatchHandler, instead of Handler, handles everything waiting in a
	// lane at once: the message a lane's worker takes and up to LaneBuffer
	// more behind it.
	BatchHandler BatchHandler
	// Concurrency is how many messages this process handles at once. Several
	// processes running the same consumer share its messages. Default 1.
	Concurrency int
	// OrderKey, when set, makes messages with the same key run one at a time
	// in stream order (BySubject keeps each subject in order), while
	// different keys run concurrently. A failed message is redelivered after
	// its backoff, so later messages of its key may be handled before it,
	// unless RetryInOrder is set.
	// Across processes, order holds when the consumer has a pinned priority
	// group: one process at a time receives messages, and another takes
	// over once it stops pulling. A consumer created from this config has
	// one (group "ordered", 30s takeover); a defined consumer says so in
	// its file (priority_groups, priority_policy "pinned_client",
	// priority_timeout).
	OrderKey func(jetstream.Msg) string
	// RetryInOrder, with an OrderKey, retries a failed message in its lane
	// after its backoff, holding back the messages behind it, instead of
	// handing it back and going on: a key's messages are then handled in
	// stream order even when the handler fails (a database restart), at
	// the cost of the lane's other keys waiting too. Only a message that
	// exhausts its attempts is dead-lettered and passed.
	RetryInOrder bool
	// BatchSize is how many messages are fetched ahead of the handlers.
	// Without an OrderKey a fetched message's ack wait runs while it
	// waits, so keep BatchSize / Concurrency × handler time below the ack
	// wait. With an OrderKey the fetched messages go to their lanes at
	// once and are kept alive there (see LaneBuffer). Default
	// max(16, 2×Concurrency).
	BatchSize int
	// LaneBuffer, with an OrderKey and a BatchHandler, is how many of the
	// messages waiting in a lane behind the one its worker takes are
	// handled in the same batch. A lane holds every fetched message of its
	// keys while their handler runs, whatever LaneBuffer says, so that one
	// busy key never holds back the keys behind it, and tells the server
	// they are being worked on, so none is handed out again while it
	// waits; the consumer's max_ack_pending bounds what the lanes hold.
	// Default 0: one message at a time.
	LaneBuffer int
	// MaxDeliver is how many times the handler is tried before the message
	// is dead-lettered, when the consumer's max_deliver does not say.
	// Default 5. The consumer is given max_deliver = MaxDeliver+1: the spare
	// delivery dead-letters, without calling the handler, a message whose
	// handler never returned (the process crashed on it each time), so a
	// poison message cannot stall the consumer. Likewise a defined consumer
	// with max_deliver N gives N-1 handler attempts.
	MaxDeliver int
	// Backoff is the redelivery delay after the n-th failed attempt (the
	// last value repeats), used when the consumer has no backoff of its own
	// (a retry_backoff in its file, or a backoff on the server).
	// Default 1s, 5s, 30s, 2m.
	Backoff []time.Duration
	// FilterSubjects selects the stream's subjects for a consumer created
	// from this config; empty means all of them.
	FilterSubjects []string
	// AckWait is the ack wait of a consumer created from this config.
	// Default 30s.
	AckWait time.Duration
	// MaxAckPending bounds the unacknowledged messages of a consumer created
	// from this config, over all processes. Default 1000.
	MaxAckPending int
	// IdleHeartbeat is how often the server confirms an idle pull is alive.
	// When heartbeats stop, the runner pulls again; after three misses in a
	// row it subscribes anew. Default 5s, at most 15s.
	IdleHeartbeat time.Duration
	// ShutdownTimeout is how long in-flight handlers may go on after Run's
	// context ends before their context is cancelled. Default 30s.
	ShutdownTimeout time.Duration
	// Definitions hold the consumer definitions from the nats/ folder; nil
	// means the embedded ones. A defined consumer is created from its file
	// when missing and otherwise used as it is (Provision updates it); an
	// undefined one is created or updated from this config.
	Definitions *Definitions
	// Logger receives the runner's log; nil means slog.Default() with
	// component=<Consumer>.
	Logger *slog.Logger
}

func (c *RunnerConfig) setDefaults() error {
	if c.Concurrency <= 0 {
		c.Concurrency = 1
	}
	if c.BatchSize <= 0 {
		c.BatchSize = max(16, 2*c.Concurrency)
	}
	if c.MaxDeliver <= 0 {
		c.MaxDeliver = 5
	}
	if len(c.Backoff) == 0 {
		c.Backoff = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute}
	}
	if c.AckWait <= 0 {
		c.AckWait = 30 * time.Second
	}
	if c.MaxAckPending <= 0 {
		c.MaxAckPending = 1000
	}
	if c.IdleHeartbeat <= 0 {
		c.IdleHeartbeat = 5 * time.Second
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default().With("component", c.Consumer)
	}
	if c.Definitions == nil {
		defs, err := DefaultDefinitions()
		if err != nil {
			return err
		}
		c.Definitions = defs
	}
	return nil
}

// Validate reports a configuration Run cannot work with.
func (c RunnerConfig) Validate() error {
	switch {
	case c.Stream == "":
		return errors.New("bus: RunnerConfig.Stream is required")
	case c.Consumer == "":
		return errors.New("bus: RunnerConfig.Consumer is required")
	case strings.ContainsAny(c.Consumer, ".*> \t\r\n/\\"):
		return fmt.Errorf("bus: RunnerConfig.Consumer %q must be a single subject token", c.Consumer)
	case c.Handler == nil && c.BatchHandler == nil:
		return errors.New("bus: RunnerConfig.Handler or BatchHandler is required")
	case c.Handler != nil && c.BatchHandler != nil:
		return errors.New("bus: RunnerConfig.Handler and BatchHandler exclude each other")
	case c.IdleHeartbeat > 15*time.Second:
		return errors.New("bus: RunnerConfig.IdleHeartbeat must be at most 15s")
	}
	return nil
}

// BySubject is an OrderKey that keeps the messages of each subject in order.
func BySubject(m jetstream.Msg) string { return m.Subject() }

// BySidecarSession is an OrderKey that keeps the messages of each session
// in order, on the subjects agents.sidecar.<sessionId>.…
func BySidecarSession(m jetstream.Msg) string {
	parts := strings.SplitN(m.Subject(), ".", 4)
	if len(parts) < 3 {
		return m.Subject()
	}
	return parts[2]
}
