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
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/feed"
	"github.com/agentbus/agentbus/internal/jsontext"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/queries"
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
	// sessions reads a session's status.
	sessions *queries.Store
}

// New returns the ACL worker; client sends the commands and waits for
// their results, so that one session's commands apply in order.
func New(pool *pgxpool.Pool, client *command.Client) *Worker {
	return &Worker{pool: pool, client: client, timeout: 30 * time.Second, rec: newRecorder(pool),
		log: slog.Default().With("component", "acl"), sessions: queries.New(pool, domain.SessionPool{})}
}

// Run consumes AGENTS_SIDECAR_EVENTS until ctx ends. Each session's events
// are handled one at a time, in order; sessions run concurrently, and what
// they record is written together (see recorder).
func (w *Worker) Run(ctx context.Context, js jetstream.JetStream) error {
	pub, err := bus.NewPublisher(js, bus.PublisherConfig{MinBatch: 2})
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
		Handler:  w.Handle,
		// Many sessions in flight at once make the recorder's writes
		// large; a busy session's lane holds its next events without
		// holding up the other sessions'.
		Concurrency: 256,
		LaneBuffer:  8,
		OrderKey:    sessionOf,
	})
}

// sessionOf returns the session token of agents.sidecar.<id>.events.<type>.
func sessionOf(m jetstream.Msg) string {
	parts := strings.SplitN(m.Subject(), ".", 4)
	if len(parts) < 3 {
		return m.Subject()
	}
	return parts[2]
}

// Handle records one raw event and dispatches its commands. A raw event
// that cannot be read, or whose text holds a NUL character or bytes that
// are not UTF-8, is recorded as an UnknownEvent activity item and
// dead-lettered; the worker goes on.
func (w *Worker) Handle(ctx context.Context, m jetstream.Msg) error {
	meta, err := m.Metadata()
	if err != nil {
		return err
	}
	var ev protocol.RawEvent
	if err := json.Unmarshal(m.Data(), &ev); err != nil {
		return bus.Permanent(fmt.Errorf("raw event on %s is not JSON: %w", m.Subject(), err))
	}
	sessionID, err := uuid.Parse(ev.SessionID)
	if err != nil {
		return bus.Permanent(fmt.Errorf("raw event on %s has session id %q: %w", m.Subject(), ev.SessionID, err))
	}
	at := time.UnixMilli(ev.TS).UTC()
	if ev.TS == 0 {
		at = meta.Timestamp.UTC()
	}
	var (
		tr   translation
		terr error
	)
	if p := invalidText(m.Data()); p != nil {
		tr, terr = translation{activity: invalidTextActivity(ev, p)}, fmt.Errorf("raw event on %s: %w", m.Subject(), p)
		ev.Type = jsontext.Clean(ev.Type)
	} else if ev.Type == protocol.EventTextDelta {
		return w.publishTextDelta(ctx, ev, sessionID, meta.Sequence.Stream, at)
	} else if tr, terr = translate(ev); terr != nil {
		tr = translation{activity: unknownActivity(ev, terr)}
	}
	tr.activity.SessionID = sessionID
	tr.activity.Timestamp = at
	msgID := m.Headers().Get(jetstream.MsgIDHeader)
	if msgID == "" {
		msgID = fmt.Sprintf("%s:%d", m.Subject(), meta.Sequence.Stream)
	}
	record := func() error {
		seq := meta.Sequence.Stream
		item, err := activityItem(ctx, w.pool, seq, ev.Type, tr.toolUseID, tr.activity)
		if err != nil {
			return err
		}
		var msg *nats.Msg
		if w.feed != nil {
			kind, data := feedItem(ev, item, tr.toolUseID)
			if msg, err = w.feed.message(ctx, sessionID, seq, kind, at, data); err != nil {
				return err
			}
		}
		return w.rec.record(ctx, &postgres.ActivityRow{Item: item, Seq: seq, RawType: ev.Type, ToolUseID: tr.toolUseID}, msg)
	}
	if tr.ack && terr == nil {
		// An ack's item says what it did, so it is recorded after its
		// command: the session confirms only the command it awaits. A
		// redelivered ack gets the first result of its command again.
		refused, err := w.dispatch(ctx, sessionID, msgID, 0, tr.commands[0])
		if err != nil {
			return err
		}
		if refused != nil {
			tr.activity = unexpectedAck(ev, refused, tr.activity)
		}
		return record()
	}
	if err := record(); err != nil {
		return err
	}
	if terr != nil {
		return bus.Permanent(terr)
	}
	skip := -1
	if ev.Type == protocol.EventMessageDelivered {
		if skip, err = w.refusedTurn(ctx, sessionID, tr.commands); err != nil {
			return err
		}
	}
	for i, out := range tr.commands {
		if i == skip {
			continue
		}
		if _, err := w.dispatch(ctx, sessionID, msgID, i, out); err != nil {
			return err
		}
	}
	return nil
}

// refusedTurn returns the position of BeginTurn among a delivery's
// commands when the session runs, and -1 otherwise: the message joins the
// running turn, and BeginTurn would only be refused. The session's earlier
// raw events have all been applied by now (one session's events are
// handled in order, each waiting for its commands' results), so the status
// read is the one the command would meet, but for a change from outside
// the sidecar in between.
func (w *Worker) refusedTurn(ctx context.Context, sessionID uuid.UUID, cmds []outgoing) (int, error) {
	i := slices.IndexFunc(cmds, func(c outgoing) bool {
		return c.aggregate == domain.AggregateSession && c.name == command.BeginTurn
	})
	if i < 0 {
		return -1, nil
	}
	status, err := w.sessions.Status(ctx, sessionID)
	if err != nil {
		return -1, err
	}
	if status != domain.StatusRunning {
		return -1, nil
	}
	return i, nil
}

// dispatch sends one command and waits for its result. A refusal is
// final and returned: the raw event stays recorded and the refusal is
// logged, since the session had already moved on (a late acknowledgement,
// say).
func (w *Worker) dispatch(ctx context.Context, sessionID uuid.UUID, msgID string, i int, out outgoing) (*command.Error, error) {
	cmd, err := command.New(out.aggregate, out.name, sessionID, "", out.data)
	if err != nil {
		return nil, bus.Permanent(err)
	}
	cmd.ID = uuid.NewSHA1(commandNamespace, []byte(fmt.Sprintf("%s/%d", msgID, i)))
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	r, err := w.client.Do(ctx, cmd)
	if err != nil {
		return nil, err
	}
	e, ok := command.AsError(r.Err())
	if !ok {
		return nil, nil
	}
	w.log.Info("command refused", "session_id", sessionID, "command", out.name, "kind", e.Kind, "error", e.Message)
	return e, nil
}

// publishTextDelta puts a text_delta on the live feed without recording
// it.
func (w *Worker) publishTextDelta(ctx context.Context, ev protocol.RawEvent, sessionID uuid.UUID, seq uint64, at time.Time) error {
	d, err := textDelta(ev, sessionID, at)
	if err != nil {
		return bus.Permanent(err)
	}
	if w.feed == nil {
		return nil
	}
	msg, err := w.feed.message(ctx, sessionID, seq, feed.KindTextDelta, at, d)
	if err != nil {
		return err
	}
	return w.rec.record(ctx, nil, msg)
}

var errUnknownType = errors.New("unknown raw event type")
