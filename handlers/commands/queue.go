package commands

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
)

var queues postgres.Queues

// onQueue adapts one operation on a session's message queue into a
// Handler. The operation sees the session's current status, which decides
// what may be enqueued.
func onQueue[T any](now Clock, apply func(q *domain.SessionMessageQueue, in T, status domain.SessionStatus, at time.Time) error) Handler {
	return func(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
		in, err := decode[T](cmd)
		if err != nil {
			return nil, err
		}
		s, err := ownSession(ctx, tx, cmd, cmd.AggregateID)
		if err != nil {
			return nil, err
		}
		q, err := queues.Update(ctx, tx, s.ID(), s.OwnerID(), func(q *domain.SessionMessageQueue) error {
			return apply(q, in, s.Status(), now().UTC())
		})
		if err != nil {
			return nil, err
		}
		return command.QueueState{SessionID: q.SessionID(), Pending: q.Pending(), Messages: q.Messages()}, nil
	}
}

func registerQueue(d *Dispatcher, now Clock) {
	reg := func(name string, h Handler) { d.Register(domain.AggregateQueue, name, h) }
	reg(command.EnqueueMessage, onQueue(now, func(q *domain.SessionMessageQueue, in command.EnqueueData, status domain.SessionStatus, at time.Time) error {
		source := in.Source
		if source == "" {
			source = domain.MessageFromUser
		}
		_, err := q.Enqueue(in.MessageID, in.Content, in.Priority, source, status, at)
		return err
	}))
	reg(command.CancelMessage, onQueue(now, func(q *domain.SessionMessageQueue, in command.MessageData, _ domain.SessionStatus, at time.Time) error {
		return q.Cancel(in.MessageID, at)
	}))
	reg(command.PromoteMessage, onQueue(now, func(q *domain.SessionMessageQueue, in command.MessageData, _ domain.SessionStatus, at time.Time) error {
		return q.Promote(in.MessageID, at)
	}))
	reg(command.MarkDelivered, onQueue(now, func(q *domain.SessionMessageQueue, in command.MessageData, _ domain.SessionStatus, at time.Time) error {
		return q.MarkDelivered(in.MessageID, at)
	}))
}
