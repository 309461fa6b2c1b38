package commands_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/handlers/commands"
)

// benchSkeleton is the session/postgres=durable row's durable work per
// command, done with bare library calls and none of agentbus's logic (no
// bus.Run, no dispatcher, no domain, no outbox package), on a NATS server
// and a Postgres configured as that row's. What it takes is what this
// machine takes for the shape of the work; what ours takes beyond it is
// our own.
//
//	command.Client.Do: publish with Nats-Msg-Id and a reply inbox, wait for the reply
//	  → AGENTS_COMMANDS, provisioned as for ours: file, work queue, the same
//	    duplicate window, an fsync before the ack unless fsync=off
//	  → the durable pull consumer "commands", taken by benchConcurrency()
//	    goroutines with Messages + Next, as bus.Run
//	      BEGIN + SELECT the session's row                         round trip 1
//	      UPDATE it with a version check + INSERT an outbox row
//	        + INSERT the command's processed row + COMMIT          round trip 2, fsync
//	      reply on core NATS
//	      publish the event on AGENTS_EVENTS, wait for its ack     fsync
//	      ack the command: the work queue's delete                 fsync
//
// The sender is command.Client itself, as in every other row: it only
// publishes and waits for the reply (and observes the latency in a
// histogram). The streams and the consumer are the ones bustest provisions,
// so their configuration is ours by construction.
//
// Ours does more, left out here on purpose:
//   - the domain: decoding the loaded session, applying the command,
//     encoding the snapshot, the event and the result;
//   - the sessions table's six secondary indexes: every command of the
//     cycle changes the status, an indexed column, so its update cannot be
//     HOT and adds an entry to each (the skeleton's table has its primary
//     key only);
//   - the outbox row's DELETE, batched every 10ms by the forwarder with
//     synchronous_commit off, and the forwarder's sweep;
//   - the gates that keep an aggregate's events in commit order, and
//     bus.Run's bookkeeping per message (metadata, retry policy, tracing).
func benchSkeleton(b testing.TB, dbURL string, skipFsync bool) benchOp {
	ctx, cancel := context.WithCancel(context.Background())
	concurrency := benchConcurrency()
	cfg, err := pgxpool.ParseConfig(dbURL)
	require.NoError(b, err)
	cfg.MaxConns = int32(concurrency)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	// Tables in the shape of ours: a document per session with its
	// version; an outbox row ordered by position, unique by event id; the
	// processed command keyed by its id, with its result.
	_, err = pool.Exec(ctx, `
		CREATE TABLE skel_sessions (id uuid PRIMARY KEY, version bigint NOT NULL, doc jsonb NOT NULL);
		CREATE TABLE skel_outbox (position bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			id uuid NOT NULL UNIQUE, subject text NOT NULL, payload jsonb NOT NULL);
		CREATE TABLE skel_processed (command_id uuid PRIMARY KEY, result json NOT NULL)`)
	require.NoError(b, err)

	// As in benchSessions: the senders on one connection, the worker on
	// another, its event publishes on a third, as the outbox forwarder.
	srv, js, nc := natsServer(b, skipFsync)
	wnc, wjs := bustest.Connect(b, srv)
	_, ejs := bustest.Connect(b, srv)
	w := &skeletonWorker{pool: pool, nc: wnc, events: ejs}

	sessions := make([][]*benchSession, benchSenders)
	for s := range sessions {
		owner := uuid.NewString()
		for range benchSessionsPerSender {
			id := uuid.New()
			_, err := pool.Exec(ctx, `INSERT INTO skel_sessions VALUES ($1, 1, $2)`, id, skeletonDoc(id, owner))
			require.NoError(b, err)
			sessions[s] = append(sessions[s], &benchSession{id: id, owner: owner})
		}
	}

	cons, err := wjs.Consumer(ctx, bus.StreamCommands, commands.Consumer)
	require.NoError(b, err)
	it, err := cons.Messages(jetstream.PullMaxMessages(max(16, 2*concurrency)), jetstream.PullHeartbeat(5*time.Second))
	require.NoError(b, err)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for {
				m, err := it.Next(jetstream.NextContext(ctx))
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					continue // a missed heartbeat: the iterator pulls again
				}
				if err := w.handle(ctx, m); err != nil && ctx.Err() == nil {
					w.fail(m, err)
				}
			}
		})
	}
	// Registered last, so it runs first: the worker stops before the
	// servers it uses.
	b.Cleanup(func() { cancel(); wg.Wait(); it.Stop() })

	client, err := command.NewClient(nc, js, nil)
	require.NoError(b, err)
	b.Cleanup(func() { _ = client.Close() })
	op := func(ctx context.Context, sender, i int) error {
		s := sessions[sender][i%benchSessionsPerSender]
		step := sessionCycle[s.step%len(sessionCycle)]
		s.step++
		owner, data := s.owner, any(nil)
		if step.internal {
			// The same shape as the durable row's acks, which echo the
			// id of the command the session awaits.
			owner, data = "", command.AckData{CommandID: uuid.New()}
		}
		cmd, err := command.New(domain.AggregateSession, step.name, s.id, owner, data)
		if err != nil {
			return err
		}
		r, err := client.Do(ctx, cmd)
		if err != nil {
			return err
		}
		return r.Err()
	}

	// The durable row's setup sends two commands per session through its
	// worker before it is measured; one per session warms the skeleton's
	// connections and prepared statements alike.
	var warm sync.WaitGroup
	errs := make(chan error, benchSenders)
	for s := range benchSenders {
		warm.Go(func() {
			for i := range benchSessionsPerSender {
				if err := op(ctx, s, i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	warm.Wait()
	close(errs)
	require.NoError(b, <-errs)
	return op
}

// skeletonWorker is the skeleton's commands worker.
type skeletonWorker struct {
	pool   *pgxpool.Pool
	nc     *nats.Conn
	events jetstream.JetStream
}

// skeletonCommand is what the worker reads of a command.
type skeletonCommand struct {
	ID          uuid.UUID `json:"id"`
	Name        string    `json:"type"`
	AggregateID uuid.UUID `json:"aggregateId"`
	OwnerID     string    `json:"ownerId"`
}

// skeletonEventTypes names the event of each command of sessionCycle.
var skeletonEventTypes = map[string]string{
	command.PauseSession:   "session_pause_requested",
	command.ConfirmPaused:  "session_paused",
	command.ResumeSession:  "session_resume_requested",
	command.ConfirmResumed: "session_resumed",
}

// handle does one command's durable work: the transaction, the reply, the
// event, the ack.
func (w *skeletonWorker) handle(ctx context.Context, m jetstream.Msg) error {
	var cmd skeletonCommand
	if err := json.Unmarshal(m.Data(), &cmd); err != nil {
		return err
	}
	eventID, eventType := uuid.New(), skeletonEventTypes[cmd.Name]
	reply, event, err := w.transaction(ctx, cmd, eventID, eventType)
	if err != nil {
		return err
	}
	// The result is committed: the reply promises nothing a crash could
	// lose, so it goes before the event, as ours.
	if err := w.nc.Publish(m.Headers().Get(command.ReplyHeader), reply); err != nil {
		return err
	}
	msg := &nats.Msg{Subject: "agents.evt.session." + cmd.AggregateID.String() + "." + eventType, Data: event, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, eventID.String())
	msg.Header.Set("Agents-Type", eventType)
	if _, err := w.events.PublishMsg(ctx, msg); err != nil {
		return err
	}
	return m.Ack()
}

// transaction runs the command's transaction in the round trips of ours
// (postgres.InTx with QueueCommit): BEGIN goes with the load, the writes
// with COMMIT. It returns the reply, which is also the recorded result,
// and the event written to the outbox.
func (w *skeletonWorker) transaction(ctx context.Context, cmd skeletonCommand, eventID uuid.UUID, eventType string) (reply, event []byte, err error) {
	conn, err := w.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Release()
	defer func() {
		if err != nil {
			_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	var version int64
	var doc []byte
	load := &pgx.Batch{}
	load.Queue("BEGIN")
	load.Queue(`SELECT version, doc FROM skel_sessions WHERE id = $1`, cmd.AggregateID).
		QueryRow(func(r pgx.Row) error { return r.Scan(&version, &doc) })
	if err := conn.SendBatch(ctx, load).Close(); err != nil {
		return nil, nil, err
	}

	// The document goes back as it came: Postgres parses and stores it
	// all the same. The result holds it, as ours holds the snapshot.
	reply = fmt.Appendf(nil, `{"commandId":%q,"state":{"session":%s}}`, cmd.ID, doc)
	event, err = json.Marshal(skeletonEnvelope{ID: eventID, Type: eventType, Aggregate: domain.AggregateSession,
		AggregateID: cmd.AggregateID, Version: version + 1, OwnerID: cmd.OwnerID, OccurredAt: time.Now(),
		Data: skeletonEventData{SessionID: cmd.AggregateID, CommandID: cmd.ID, OccurredAt: time.Now(), Reason: "requested by its owner"}})
	if err != nil {
		return nil, nil, err
	}
	save := &pgx.Batch{}
	// Checked by the client once the batch, COMMIT included, ran: senders
	// never share a session, so it never fails. Ours checks in the server
	// so that a conflict keeps the COMMIT from running.
	save.Queue(`UPDATE skel_sessions SET version = version + 1, doc = $3 WHERE id = $1 AND version = $2`,
		cmd.AggregateID, version, doc).Exec(func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("session %s: version conflict", cmd.AggregateID)
		}
		return nil
	})
	save.Queue(`INSERT INTO skel_outbox (id, subject, payload) VALUES ($1, $2, $3)`,
		eventID, "agents.evt.session."+cmd.AggregateID.String()+"."+eventType, event)
	save.Queue(`INSERT INTO skel_processed VALUES ($1, $2)`, cmd.ID, reply)
	save.Queue("COMMIT")
	if err := conn.SendBatch(ctx, save).Close(); err != nil {
		return nil, nil, err
	}
	return reply, event, nil
}

// fail answers a command the skeleton could not handle with the error, so
// that its sender fails the benchmark at once instead of waiting, and
// takes the command off the queue.
func (w *skeletonWorker) fail(m jetstream.Msg, err error) {
	var cmd skeletonCommand
	_ = json.Unmarshal(m.Data(), &cmd)
	body, _ := json.Marshal(command.Result{CommandID: cmd.ID,
		Error: &command.Error{Kind: command.KindInternal, Message: "skeleton: " + err.Error()}})
	_ = w.nc.Publish(m.Headers().Get(command.ReplyHeader), body)
	_ = m.Term()
}

// skeletonEnvelope is an event as the outbox holds it, about the size of
// ours (bus.Envelope).
type skeletonEnvelope struct {
	ID          uuid.UUID         `json:"id"`
	Type        string            `json:"type"`
	Aggregate   string            `json:"aggregate"`
	AggregateID uuid.UUID         `json:"aggregateId"`
	Version     int64             `json:"version"`
	OwnerID     string            `json:"ownerId"`
	OccurredAt  time.Time         `json:"occurredAt"`
	Data        skeletonEventData `json:"data"`
}

type skeletonEventData struct {
	SessionID  uuid.UUID `json:"sessionId"`
	CommandID  uuid.UUID `json:"commandId"`
	OccurredAt time.Time `json:"occurredAt"`
	Reason     string    `json:"reason"`
}

// skeletonDoc is a session's document, of the size and nesting of ours
// (about 1.1 kB as JSON).
func skeletonDoc(id uuid.UUID, owner string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"ownerId":%q,"name":"Keep the build green","status":"Running",`+
		`"objective":"Keep the build green","workingDirectory":"/work/repo","modelId":"claude-sonnet-4-5",`+
		`"budget":{"hardCapUsd":5,"tokensUsed":0,"warnAtPercent":80,"warningRaised":false,"estimatedCostUsd":0,"exhaustionRaised":false},`+
		`"metrics":{"turnCount":0,"totalCostUsd":0,"subAgentMetrics":null,"tokenUsageByModel":null},`+
		`"timeouts":{"input":86400000000000,"pause":600000000000},"toolApproval":{"mode":"None","timeout":120000000000,"onTimeout":"Deny"},`+
		`"apiKeyHash":"4f46f5754fc05500c69a3b3b7f05ba1e65ed0278e72eb148481180b54721f28d",`+
		`"awaitedAcks":[{"command":"pause","commandId":%q}],"executionMode":"Standalone","retryCount":0,`+
		`"reloadPending":false,"enabledSkillIds":null,"hasPendingReview":false,"sidecarCommandSeq":1,`+
		`"createdAt":"2026-11-24T22:17:18.860632112Z","startedAt":"2026-11-24T22:17:18.89943351Z","updatedAt":"2026-11-24T22:17:19.324713329Z"}`,
		id, owner, uuid.New())
}
