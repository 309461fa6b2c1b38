// Package projections builds read models from the bus. The transcript
// worker reads each session's raw sidecar events from
// AGENTS_SIDECAR_EVENTS and writes the session's transcript: its messages,
// its tool calls with their results, its subagents and its log.
//
// Every row is keyed by the stream sequence of the raw event it came from
// (or an id derived from it), so a redelivered event changes nothing and
// replaying the stream from its start rebuilds the same rows. The rows
// do not depend on the order a session's events are projected in either:
// a worker killed with events in flight has them redelivered after its
// successor went on, and a result projected before its call, or a
// subagent before the call that spawned it, still ends as in stream order.
package projections

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// Consumer is the durable consumer of the transcript worker. Renaming it
// makes JetStream replay every raw event to the worker: keep it stable.
const Consumer = "transcript"

// idNamespace derives the ids of transcript rows from what they came from.
var idNamespace = uuid.MustParse("c0a8f7e2-3b41-4d5e-9f6a-7b8c9d0e1f2a")

// Transcript projects raw sidecar events into the transcript tables.
type Transcript struct {
	pool *pgxpool.Pool
	log  *slog.Logger
}

// NewTranscript returns the transcript worker writing to pool.
func NewTranscript(pool *pgxpool.Pool) *Transcript {
	return &Transcript{pool: pool, log: slog.Default().With("component", "transcript")}
}

// Run consumes AGENTS_SIDECAR_EVENTS until ctx ends. Each session's events
// are projected in order as far as the bus keeps it, those that waited in
// its lane in one transaction, so that the transcript reads in order while
// it grows; sessions run concurrently.
func (w *Transcript) Run(ctx context.Context, js jetstream.JetStream) error {
	return bus.Run(ctx, js, bus.RunnerConfig{
		Stream:       bus.StreamSidecarEvents,
		Consumer:     Consumer,
		BatchHandler: w.HandleBatch,
		Concurrency:  4,
		// The events that wait in a lane are projected in one transaction
		// (see HandleBatch): the busier the sessions, the fewer commits.
		LaneBuffer: 64,
		OrderKey:   bus.BySidecarSession,
		// A database restart must not let a session's later events be
		// projected before the one that failed.
		RetryInOrder: true,
	})
}

// event is one raw event as the projection sees it.
type event struct {
	session uuid.UUID
	seq     int64
	at      time.Time
	typ     string
	data    json.RawMessage
}

// id derives the id of a row from the raw event it comes from.
func (e event) id(kind string) uuid.UUID {
	return uuid.NewSHA1(idNamespace, []byte(e.session.String()+"/"+kind+"/"+itoa(e.seq)))
}

// source names the raw event for the rows it writes.
func (e event) source() postgres.TranscriptSource {
	return postgres.TranscriptSource{Session: e.session, Seq: e.seq, At: e.at}
}

// Handle projects one raw event. An event it cannot read is acknowledged
// and skipped: the acl worker already records and dead-letters it, and a
// transcript must not stall on it. Rows the database refuses (a NUL in a
// text) are dead-lettered; only a failure of the database is retried.
func (w *Transcript) Handle(ctx context.Context, m jetstream.Msg) error {
	writes, err := w.writes(m)
	if err != nil {
		return err
	}
	return w.commit(ctx, writes)
}

// HandleBatch projects the raw events waiting in a lane in one
// transaction, in order, so that they share one commit. When it fails,
// each event is projected in a transaction of its own, so that an event
// the database refuses fails alone.
func (w *Transcript) HandleBatch(ctx context.Context, batch []bus.Delivery) []error {
	writes := make([][]write, len(batch))
	errs := make([]error, len(batch))
	var all []write
	for i, d := range batch {
		writes[i], errs[i] = w.writes(d.Msg)
		all = append(all, writes[i]...)
	}
	err := w.commit(ctx, all)
	switch {
	case err == nil:
	case len(batch) == 1:
		errs[0] = err
	default:
		for i, d := range batch {
			if errs[i] == nil {
				errs[i] = w.commit(d.Ctx, writes[i])
			}
		}
	}
	return errs
}

// writes returns the writes of the raw event in m; none for one it skips.
func (w *Transcript) writes(m jetstream.Msg) ([]write, error) {
	meta, err := m.Metadata()
	if err != nil {
		return nil, err
	}
	var raw protocol.RawEvent
	if err := json.Unmarshal(m.Data(), &raw); err != nil {
		w.log.Debug("raw event skipped", "subject", m.Subject(), "error", err)
		return nil, nil
	}
	sessionID, err := uuid.Parse(raw.SessionID)
	if err != nil || raw.Type == protocol.TypeInvalid || len(raw.Data) == 0 {
		return nil, nil
	}
	ev := event{session: sessionID, seq: int64(meta.Sequence.Stream), typ: raw.Type, data: raw.Data,
		at: time.UnixMilli(raw.TS).UTC()}
	if raw.TS == 0 {
		ev.at = meta.Timestamp.UTC()
	}
	writes, err := project(ev)
	if err != nil {
		w.log.Debug("raw event skipped", "subject", m.Subject(), "error", err)
		return nil, nil
	}
	return writes, nil
}

// commit runs writes in one transaction, sent to the database as one
// batch: a batch runs in an implicit transaction, and a lane's events
// then cost one round trip instead of one per statement, which on a busy
// host leaves the CPU to the live feed.
func (w *Transcript) commit(ctx context.Context, writes []write) error {
	if len(writes) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, write := range writes {
		if err := write(ctx, queue{b}); err != nil {
			return err
		}
	}
	err := w.pool.SendBatch(ctx, b).Close()
	if pgErr, refused := postgres.RefusedData(err); refused {
		// The rows fail the same way however often they are tried: the
		// event is dead-lettered, and the session's later events go on.
		return bus.Permanent(fmt.Errorf("the database refuses the rows of the raw event: %w", pgErr))
	}
	return err
}

// queue is an Execer that queues its statements into a batch.
type queue struct{ b *pgx.Batch }

func (q queue) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	q.b.Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}
