// Package commands is the commands worker: it consumes AGENTS_COMMANDS and
// runs one small handler per command (load, call the domain, save), exactly
// once per command id, and answers each command with its result.
package commands

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/outbox"
	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/internal/jsontext"
	"github.com/agentbus/agentbus/postgres"
)

// Consumer is the durable consumer of the commands worker. Renaming it
// makes JetStream treat the worker as new: keep it stable.
const Consumer = "commands"

// Handler runs one command inside tx and returns a summary of the new
// state. A refusal by the domain is returned as an error that Classify
// recognises; postgres.ErrVersionConflict makes the dispatcher retry; any
// other error is treated as transient and the message is redelivered.
type Handler func(ctx context.Context, tx pgx.Tx, cmd command.Command) (state any, err error)

// WithSecret is a handler's state with a part that only the live caller
// may see (a plaintext API key): the stored result, which a repeated
// command gets, holds State; the reply to the caller holds Secret.
type WithSecret struct {
	State  any
	Secret any
}

// Dispatcher routes each command to its handler.
type Dispatcher struct {
	pool     *pgxpool.Pool
	nc       *nats.Conn
	classify func(error) *command.Error
	handlers map[string]Handler
	log      *slog.Logger

	// wakeWanted and waking coordinate the handlers' notifications to
	// the outbox forwarder's sweep (wakeOutbox).
	wakeWanted, waking atomic.Bool

	// forwarder, when set, publishes each command's events right after
	// its commit; gates keep them in commit order (see ForwardEvents).
	forwarder Forwarder
	gates     gates
}

// Forwarder publishes committed outbox messages and forgets them.
type Forwarder interface {
	Forward(ctx context.Context, msgs []outbox.Message) error
}

// ForwardEvents makes the dispatcher publish each command's events through
// f right after the commit, instead of leaving them to the outbox sweep:
// the sweep stays the safety net for a worker that dies in between. One
// aggregate's commands can only commit one after the other (its version
// check), and each holds its aggregates' gates from before its commit
// until its events are stored, so the events reach JetStream in commit
// order. The gates are this process's: with several copies of the
// commands worker, two commands on one aggregate handled by different
// copies in quick succession may publish out of order.
func (d *Dispatcher) ForwardEvents(f Forwarder) { d.forwarder = f }

// NewDispatcher returns a dispatcher that stores its effects in pool,
// answers over nc, and turns domain errors into results with classify
// (which returns nil for errors that are not the domain's).
func NewDispatcher(pool *pgxpool.Pool, nc *nats.Conn, classify func(error) *command.Error) *Dispatcher {
	return &Dispatcher{pool: pool, nc: nc, classify: classify, handlers: map[string]Handler{},
		log: slog.Default().With("component", "commands")}
}

// Register adds the handler of one command.
func (d *Dispatcher) Register(aggregate, name string, h Handler) {
	d.handlers[aggregate+"."+name] = h
}

// Names returns the registered commands as aggregate.name.
func (d *Dispatcher) Names() []string {
	names := make([]string, 0, len(d.handlers))
	for n := range d.handlers {
		names = append(names, n)
	}
	return names
}

// maxConflictRetries bounds how often one delivery retries a version
// conflict before leaving it to redelivery.
const maxConflictRetries = 20

// Handle processes one message of AGENTS_COMMANDS. It returns nil once the
// command has a result (success or refusal), so the message is acked.
func (d *Dispatcher) Handle(ctx context.Context, msg jetstream.Msg) error {
	var cmd command.Command
	if err := jsonv1.Unmarshal(msg.Data(), &cmd); err != nil {
		return bus.Permanent(fmt.Errorf("malformed command on %s: %w", msg.Subject(), err))
	}
	result, reply, events, err := d.run(ctx, cmd)
	if err != nil {
		return err
	}
	d.reply(msg, result, reply)
	if events != nil {
		d.forward(ctx, events)
	}
	d.wakeOutbox(ctx)
	return nil
}

// committed are the events of a committed command, with its aggregates'
// gates held.
type committed struct {
	msgs   []outbox.Message
	unlock func()
}

// forward publishes a command's committed events, retrying while ctx lasts
// with the gates held, so the next command on the same aggregates cannot
// overtake them. What is left when ctx ends goes out with the sweep.
func (d *Dispatcher) forward(ctx context.Context, c *committed) {
	defer c.unlock()
	for attempt := 0; ; attempt++ {
		err := d.forwarder.Forward(ctx, c.msgs)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			d.wakeWanted.Store(true)
			return
		}
		if attempt == 0 {
			d.log.Warn("events not published yet, retrying", "error", err)
		}
		time.Sleep(min(time.Duration(attempt+1)*50*time.Millisecond, time.Second))
	}
}

// wakeOutbox wakes the outbox publisher once a commit with events asked
// for it (wakeWanted), after the reply, so the caller does not wait for it.
// While one handler sends a notification, the others leave theirs to it:
// it sends another when one was asked for in the meantime, so every commit
// is followed by a notification, and under load they share them.
func (d *Dispatcher) wakeOutbox(ctx context.Context) {
	for d.wakeWanted.Load() && d.waking.CompareAndSwap(false, true) {
		d.wakeWanted.Store(false)
		err := postgres.NotifyOutbox(ctx, d.pool)
		d.waking.Store(false)
		if err != nil {
			d.log.Warn("outbox publisher not woken; it finds the events at its next poll", "error", err)
			return
		}
	}
}

func (d *Dispatcher) run(ctx context.Context, cmd command.Command) (command.Result, json.RawMessage, *committed, error) {
	handler, ok := d.handlers[cmd.Aggregate+"."+cmd.Name]
	if !ok {
		r, err := d.refuse(ctx, cmd, &command.Error{Kind: command.KindValidation,
			Message: fmt.Sprintf("unknown command %s.%s", cmd.Aggregate, cmd.Name)})
		return r, nil, nil, err
	}
	for attempt := 0; ; attempt++ {
		result, reply, events, err := d.attempt(ctx, cmd, handler)
		if errors.Is(err, postgres.ErrVersionConflict) && attempt < maxConflictRetries {
			// Jitter keeps contending writers of one aggregate from
			// colliding again in lockstep.
			time.Sleep(time.Duration(rand.IntN(1+attempt*2)) * time.Millisecond)
			continue
		}
		if err != nil {
			refusal := d.classify(err)
			if refusal == nil {
				refusal = refusedData(err)
			}
			if refusal != nil {
				r, err := d.refuse(ctx, cmd, refusal)
				return r, nil, nil, err
			}
			return command.Result{}, nil, nil, err
		}
		return result, reply, events, nil
	}
}

// attempt runs the handler and records the result in one transaction, or
// returns the result recorded by an earlier delivery of the same command.
// With the result it returns the reply to send, encoded, when it has it
// (the recorded result, or the one that shows the caller a secret).
// With a forwarder, it returns the committed events to forward, their
// gates held.
//
// A command is nearly always new, so the handler runs without looking for
// an earlier result first: the record of the result is the last statement,
// and if an earlier delivery recorded one, that record's key refuses it,
// the transaction rolls back with everything the handler did, and the
// earlier result is returned. The common case saves a round trip.
func (d *Dispatcher) attempt(ctx context.Context, cmd command.Command, handler Handler) (command.Result, json.RawMessage, *committed, error) {
	var result command.Result
	var reply json.RawMessage
	var events *committed
	err := postgres.InTx(ctx, d.pool, func(tx pgx.Tx) error {
		deferred := postgres.DeferOutbox(tx)
		state, err := handler(ctx, deferred, cmd)
		if err != nil {
			return err
		}
		result = command.Result{CommandID: cmd.ID}
		var secret json.RawMessage
		if ws, ok := state.(WithSecret); ok {
			if secret, err = json.Marshal(ws.Secret); err != nil {
				return err
			}
			state = ws.State
		}
		if state != nil {
			if result.State, err = json.Marshal(state); err != nil {
				return err
			}
		}
		// The events, the record of the result and the commit go in one
		// round trip.
		last := &pgx.Batch{}
		recorded, err := json.Marshal(result)
		if err != nil {
			return err
		}
		postgres.QueueMarkProcessedJSON(last, Consumer, cmd.ID.String(), recorded)
		reply = recorded
		if secret != nil {
			// The secret is shown once, in the reply, and not recorded.
			if reply, err = json.Marshal(command.Result{CommandID: cmd.ID, State: secret}); err != nil {
				return err
			}
		}
		postgres.QueueCommit(last)
		if d.forwarder != nil && len(deferred.Pending()) > 0 {
			events = &committed{unlock: d.gates.lock(deferred.Pending())}
		}
		if err := deferred.Flush(ctx, last); err != nil {
			return err
		}
		if events != nil {
			for _, m := range deferred.Written() {
				events.msgs = append(events.msgs, m.Message())
			}
		}
		return nil
	})
	if events != nil && err != nil {
		events.unlock()
		events = nil
	}
	if err == nil && d.forwarder == nil {
		// Nearly every command raises events; waking the sweep for the
		// few that do not costs less than finding out.
		d.wakeWanted.Store(true)
	}
	if postgres.IsUniqueViolation(err) {
		// Another delivery of the same command committed first: its
		// result is the one to return. Without one, the violation is the
		// handler's own, and run refuses the command for it. (A repeat
		// the domain refuses, since the first one changed the state, finds
		// the first result when run records the refusal.)
		r, ok, serr := postgres.ProcessedResult[command.Result](ctx, d.pool, Consumer, cmd.ID.String())
		switch {
		case serr != nil:
			return command.Result{}, nil, nil, serr
		case ok:
			return r, nil, nil, nil
		}
	}
	return result, reply, events, err
}

// gates serialise the publication of the events of one aggregate within
// this process; aggregates share a gate by the hash of their id.
type gates [256]sync.Mutex

// lock takes the gates of the aggregates of msgs, in gate order so that
// two handlers never wait for each other, and returns what releases them.
func (g *gates) lock(msgs []postgres.OutboxMessage) (unlock func()) {
	var idx []int
	for _, m := range msgs {
		idx = append(idx, int(binary.BigEndian.Uint64(m.AggregateID[8:])%uint64(len(g))))
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	for _, i := range idx {
		g[i].Lock()
	}
	return func() {
		for _, i := range idx {
			g[i].Unlock()
		}
	}
}

// refusedData refuses a command whose data Postgres refused (a NUL in a
// text, a violated constraint): trying it again fails again, so it is
// answered at once instead of retried until dead-lettered. The edges
// check text before it gets here; this is what is left.
func refusedData(err error) *command.Error {
	pgErr, ok := postgres.RefusedData(err)
	if !ok {
		return nil
	}
	kind := command.KindValidation
	if pgErr.Code == "23505" {
		kind = command.KindConflict
	}
	return &command.Error{Kind: kind, Message: "the data was refused: " + pgErr.Message, Field: pgErr.ColumnName}
}

// refuse records a refusal so that a repeat of the command gets the same
// answer, and returns it.
func (d *Dispatcher) refuse(ctx context.Context, cmd command.Command, refusal *command.Error) (command.Result, error) {
	// The refusal is stored as jsonb, which takes no NUL: a message that
	// quotes the refused input must not make the refusal fail in turn.
	refusal.Message = jsontext.Clean(refusal.Message)
	refusal.Field = jsontext.Clean(refusal.Field)
	result := command.Result{CommandID: cmd.ID, Error: refusal}
	err := postgres.InTx(ctx, d.pool, func(tx pgx.Tx) error {
		return postgres.MarkProcessed(ctx, tx, Consumer, cmd.ID.String(), result)
	})
	if postgres.IsUniqueViolation(err) {
		return d.stored(ctx, cmd)
	}
	return result, err
}

func (d *Dispatcher) stored(ctx context.Context, cmd command.Command) (command.Result, error) {
	var result command.Result
	err := postgres.InTx(ctx, d.pool, func(tx pgx.Tx) error {
		r, ok, err := postgres.ProcessedResult[command.Result](ctx, tx, Consumer, cmd.ID.String())
		if err == nil && !ok {
			err = fmt.Errorf("command %s: no stored result", cmd.ID)
		}
		result = r
		return err
	})
	return result, err
}

// reply sends the command's result to the caller waiting for it: body when
// the result is already encoded, result otherwise.
func (d *Dispatcher) reply(msg jetstream.Msg, result command.Result, body []byte) {
	to := msg.Headers().Get(command.ReplyHeader)
	if to == "" {
		return
	}
	if body == nil {
		var err error
		if body, err = json.Marshal(result); err != nil {
			return
		}
	}
	// A lost reply loses nothing: the result is stored and the command
	// applied; a waiting caller times out and can look the result up.
	if err := d.nc.Publish(to, body); err != nil {
		d.log.Warn("reply not sent", "command_id", result.CommandID, "error", err)
	}
}
