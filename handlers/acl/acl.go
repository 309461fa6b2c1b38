// Package acl is the anti-corruption layer: it reads each session's raw
// sidecar events from AGENTS_SIDECAR_EVENTS, records every one of them in
// the session's activity stream, and translates those that change the
// session into domain commands. Raw engine types never reach the domain.
package acl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/feed"
	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/internal/jsontext"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// Consumer is the durable consumer of the ACL worker. Renaming it makes
// JetStream replay every raw event to the worker: keep it stable.
const Consumer = "acl"

// commandNamespace derives command ids from raw event ids, so that a
// redelivered raw event sends the very same commands, which the command
// pipeline then applies once.
var commandNamespace = uuid.MustParse("6f0e4a36-6c1b-4f0e-9d1c-2b8f4d3e5a71")

// Worker translates raw sidecar events.
type Worker struct {
	pool    *pgxpool.Pool
	client  *command.Client
	timeout time.Duration
	log     *slog.Logger
	// feed makes the live feed's items of what is recorded; Run sets it.
	feed *feedPublisher
	// rec writes the activity items and feed items.
	rec *recorder
}

// New returns the ACL worker; client sends the commands and waits for
// their results, so that one session's commands apply in order.
func New(pool *pgxpool.Pool, client *command.Client) *Worker {
	return &Worker{pool: pool, client: client, timeout: 30 * time.Second, rec: newRecorder(pool),
		log: slog.Default().With("component", "acl")}
}

// Run consumes AGENTS_SIDECAR_EVENTS until ctx ends. Each session's events
// are handled in order, those that waited in its lane together; sessions
// run concurrently, and what they record is written together (see
// recorder).
func (w *Worker) Run(ctx context.Context, js jetstream.JetStream) error {
	// The server syncs every message to disk before its ack; an atomic
	// batch pays that once but costs more to stage, so the publisher
	// sends each run whichever way it measured to be done sooner.
	pub, err := bus.NewPublisher(js, bus.PublisherConfig{MeasureBatch: true})
	if err != nil {
		return err
	}
	w.feed = newFeedPublisher(w.pool)
	// The recorder outlives ctx as long as the runner's handlers do.
	recCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	w.rec.start(recCtx, pub)
	return bus.Run(ctx, js, bus.RunnerConfig{
		Stream:   bus.StreamSidecarEvents,
		Consumer: Consumer,
		// A session's events that waited in its lane are recorded in one
		// write (see HandleBatch).
		BatchHandler: w.HandleBatch,
		// Many sessions in flight at once make the recorder's writes
		// large. A busy session's next events wait in its lane, which
		// never fills, without holding up the other sessions'; one write
		// takes up to LaneBuffer of them behind the first: about a second
		// of a fast session's events.
		Concurrency: 256,
		LaneBuffer:  64,
		OrderKey:    bus.BySidecarSession,
	})
}

// Handle records one raw event and dispatches its commands. A raw event
// that cannot be read, or whose text holds a NUL character or bytes that
// are not UTF-8, is recorded as an UnknownEvent activity item and
// dead-lettered; the worker goes on.
func (w *Worker) Handle(ctx context.Context, m jetstream.Msg) error {
	r, err := read(m)
	if err != nil {
		return err
	}
	if r.delta {
		p, err := w.pending(ctx, r)
		if err != nil {
			return err
		}
		return w.rec.record(ctx, p.row, p.msg)
	}
	tr := r.tr
	msgID := m.Headers().Get(jetstream.MsgIDHeader)
	if msgID == "" {
		msgID = fmt.Sprintf("%s:%d", m.Subject(), r.meta.Sequence.Stream)
	}
	record := func() error {
		p, err := w.pending(ctx, r)
		if err != nil {
			return err
		}
		return w.rec.record(ctx, p.row, p.msg)
	}
	if tr.ack && r.terr == nil {
		// An ack's item says what it did, so it is recorded after its
		// command: the session confirms only the command it awaits. A
		// redelivered ack gets the first result of its command again.
		refused, err := w.dispatch(ctx, r.sessionID, msgID, 0, tr.commands[0])
		if err != nil {
			return err
		}
		if refused != nil {
			r.tr.activity = unexpectedAck(r.ev, refused, tr.activity)
		}
		return record()
	}
	if err := record(); err != nil {
		return err
	}
	if r.terr != nil {
		return bus.Permanent(r.terr)
	}
	running := false
	for i, out := range tr.commands {
		if running && out.aggregate == domain.AggregateSession && out.name == command.BeginTurn {
			// A message delivered while the session runs joins its turn:
			// BeginTurn would only be refused.
			continue
		}
		res, err := w.send(ctx, r.sessionID, msgID, i, out)
		if err != nil {
			return err
		}
		running = running || runs(res)
	}
	return nil
}

// runs reports whether a queue command's result saw the session running.
// The session's earlier raw events have all been applied by then (one
// session's events are handled in order, each waiting for its commands'
// results), so that is the status a BeginTurn sent next would meet, but
// for a change from outside the sidecar in between.
func runs(r command.Result) bool {
	if r.Error != nil || len(r.State) == 0 {
		return false
	}
	var state struct {
		SessionStatus domain.SessionStatus `json:"sessionStatus"`
	}
	return json.Unmarshal(r.State, &state) == nil && state.SessionStatus == domain.StatusRunning
}

// HandleBatch handles the raw events waiting in one lane, in order. The
// events that are only recorded (the agent's text, tool calls and
// results, logs: all but those that send commands) are recorded together,
// so a session's events that piled up while its previous write was under
// way share one write rather than queueing for one each. An event that
// sends commands is handled as Handle does, after everything before it is
// recorded, so the feed and the commands keep the raw events' order.
func (w *Worker) HandleBatch(ctx context.Context, batch []bus.Delivery) []error {
	errs := make([]error, len(batch))
	var (
		group   []int
		records []*pending
		fails   []error
	)
	flush := func() {
		if len(group) == 0 {
			return
		}
		for j, err := range w.rec.recordAll(ctx, records) {
			if err == nil {
				err = fails[j]
			}
			errs[group[j]] = err
		}
		group, records, fails = group[:0], records[:0], fails[:0]
	}
	for i, d := range batch {
		r, err := read(d.Msg)
		if err != nil {
			errs[i] = err
			continue
		}
		if len(r.tr.commands) > 0 || r.tr.ack {
			flush()
			errs[i] = w.Handle(d.Ctx, d.Msg)
			continue
		}
		if r.looksUpCall() {
			// Its item takes the tool name from its call's item, which may
			// be waiting in the group.
			flush()
		}
		p, err := w.pending(d.Ctx, r)
		if err != nil {
			errs[i] = err
			continue
		}
		var fail error
		if r.terr != nil {
			fail = bus.Permanent(r.terr)
		}
		group, records, fails = append(group, i), append(records, p), append(fails, fail)
	}
	flush()
	return errs
}

// rawEvent is a raw event as read from its message, with its translation.
type rawEvent struct {
	meta      *jetstream.MsgMetadata
	ev        protocol.RawEvent
	sessionID uuid.UUID
	at        time.Time
	// delta marks a text_delta, which is published but not recorded.
	delta bool
	tr    translation
	// terr is why the event could not be translated; it is then recorded
	// as an unknown or invalid event and dead-lettered.
	terr error
}

// read reads and translates the raw event in m.
func read(m jetstream.Msg) (rawEvent, error) {
	meta, err := m.Metadata()
	if err != nil {
		return rawEvent{}, err
	}
	r := rawEvent{meta: meta}
	if err := json.Unmarshal(m.Data(), &r.ev); err != nil {
		return r, bus.Permanent(fmt.Errorf("raw event on %s is not JSON: %w", m.Subject(), err))
	}
	if r.sessionID, err = uuid.Parse(r.ev.SessionID); err != nil {
		return r, bus.Permanent(fmt.Errorf("raw event on %s has session id %q: %w", m.Subject(), r.ev.SessionID, err))
	}
	r.at = time.UnixMilli(r.ev.TS).UTC()
	if r.ev.TS == 0 {
		r.at = meta.Timestamp.UTC()
	}
	if p := invalidText(m.Data()); p != nil {
		r.tr, r.terr = translation{activity: invalidTextActivity(r.ev, p)}, fmt.Errorf("raw event on %s: %w", m.Subject(), p)
		r.ev.Type = jsontext.Clean(r.ev.Type)
	} else if r.ev.Type == protocol.EventTextDelta {
		r.delta = true
		return r, nil
	} else if r.tr, r.terr = translate(r.ev); r.terr != nil {
		r.tr = translation{activity: unknownActivity(r.ev, r.terr)}
	}
	r.tr.activity.SessionID = r.sessionID
	r.tr.activity.Timestamp = r.at
	return r, nil
}

// looksUpCall tells whether the event's item reads its tool call's item.
func (r rawEvent) looksUpCall() bool {
	a := r.tr.activity
	return a.Type == domain.ActivityToolCallEnd && a.ToolName == "" && r.tr.toolUseID != ""
}

// pending is what recording the raw event writes: its activity row and
// its feed item; a text_delta has only the feed item.
func (w *Worker) pending(ctx context.Context, r rawEvent) (*pending, error) {
	seq := r.meta.Sequence.Stream
	if r.delta {
		d, err := textDelta(r.ev, r.sessionID, r.at)
		if err != nil {
			return nil, bus.Permanent(err)
		}
		if w.feed == nil {
			return &pending{}, nil
		}
		msg, err := w.feed.message(ctx, r.sessionID, seq, feed.KindTextDelta, r.at, d)
		if err != nil {
			return nil, err
		}
		return &pending{msg: msg}, nil
	}
	item, err := activityItem(ctx, w.pool, seq, r.ev.Type, r.tr.toolUseID, r.tr.activity)
	if err != nil {
		return nil, err
	}
	var msg *nats.Msg
	if w.feed != nil {
		kind, data := feedItem(r.ev, item, r.tr.toolUseID)
		if msg, err = w.feed.message(ctx, r.sessionID, seq, kind, r.at, data); err != nil {
			return nil, err
		}
	}
	return &pending{row: &postgres.ActivityRow{Item: item, Seq: seq, RawType: r.ev.Type, ToolUseID: r.tr.toolUseID}, msg: msg}, nil
}

// dispatch sends one command and waits for its result. A refusal is
// final and returned: the raw event stays recorded and the refusal is
// logged, since the session had already moved on (a late acknowledgement,
// say).
func (w *Worker) dispatch(ctx context.Context, sessionID uuid.UUID, msgID string, i int, out outgoing) (*command.Error, error) {
	r, err := w.send(ctx, sessionID, msgID, i, out)
	if err != nil {
		return nil, err
	}
	if e, ok := command.AsError(r.Err()); ok {
		return e, nil
	}
	return nil, nil
}

// send sends one command and waits for its result, which it returns, a
// refusal logged.
func (w *Worker) send(ctx context.Context, sessionID uuid.UUID, msgID string, i int, out outgoing) (command.Result, error) {
	cmd, err := command.New(out.aggregate, out.name, sessionID, "", out.data)
	if err != nil {
		return command.Result{}, bus.Permanent(err)
	}
	cmd.ID = uuid.NewSHA1(commandNamespace, []byte(fmt.Sprintf("%s/%d", msgID, i)))
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	r, err := w.client.Do(ctx, cmd)
	if err != nil {
		return command.Result{}, err
	}
	if e, ok := command.AsError(r.Err()); ok {
		w.log.Info("command refused", "session_id", sessionID, "command", out.name, "kind", e.Kind, "error", e.Message)
	}
	return r, nil
}

var errUnknownType = errors.New("unknown raw event type")
