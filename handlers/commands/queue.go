package commands

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
)

var queues postgres.Queues

// onQueue adapts one operation on a session's message queue into a
// Handler. The operation names one message, and sees the session's
// current status, which decides what may be enqueued. The session's owner
// and status, the queue and what became of that message if it already
// left the queue are read in one round trip. An operation whose events
// carry that status (byStatus) keeps the session in it until it commits
// (see Queues.LoadHolding).
func onQueue[T any](now Clock, message func(T) uuid.UUID, byStatus bool, apply func(q *domain.SessionMessageQueue, in T, status domain.SessionStatus, at time.Time) error) Handler {
	return func(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
		in, err := decode[T](cmd)
		if err != nil {
			return nil, err
		}
		var sq postgres.SessionQueue
		if byStatus {
			sq, err = queues.LoadHolding(ctx, tx, cmd.AggregateID, message(in))
		} else {
			sq, err = queues.Load(ctx, tx, cmd.AggregateID, message(in))
		}
		if err != nil {
			return nil, err
		}
		if err := checkOwner(cmd, sq.OwnerID.String(), "session"); err != nil {
			return nil, err
		}
		q := sq.Queue
		if err := apply(q, in, sq.Status, now().UTC()); err != nil {
			return nil, err
		}
		if err := queues.Save(ctx, tx, q); err != nil {
			return nil, err
		}
		return command.QueueState{SessionID: q.SessionID(), Pending: q.Pending(), NextSequence: q.NextSequence(), Settled: q.Settled(),
			SessionStatus: sq.Status}, nil
	}
}

func registerQueue(d *Dispatcher, now Clock) {
	reg := func(name string, h Handler) { d.Register(domain.AggregateQueue, name, h) }
	enqueued := func(in command.EnqueueData) uuid.UUID { return in.MessageID }
	named := func(in command.MessageData) uuid.UUID { return in.MessageID }
	reg(command.EnqueueMessage, onQueue(now, enqueued, true, func(q *domain.SessionMessageQueue, in command.EnqueueData, status domain.SessionStatus, at time.Time) error {
		source := in.Source
		if source == "" {
			source = domain.MessageFromUser
		}
		_, err := q.Enqueue(in.MessageID, in.Content, in.Priority, source, status, at)
		return err
	}))
	reg(command.CancelMessage, onQueue(now, named, false, func(q *domain.SessionMessageQueue, in command.MessageData, _ domain.SessionStatus, at time.Time) error {
		return q.Cancel(in.MessageID, at)
	}))
	reg(command.PromoteMessage, onQueue(now, named, false, func(q *domain.SessionMessageQueue, in command.MessageData, _ domain.SessionStatus, at time.Time) error {
		return q.Promote(in.MessageID, at)
	}))
	reg(command.MarkDelivered, onQueue(now, named, false, func(q *domain.SessionMessageQueue, in command.MessageData, _ domain.SessionStatus, at time.Time) error {
		return q.MarkDelivered(in.MessageID, at)
	}))
}
