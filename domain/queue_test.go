package domain_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
)

func newQueue(t *testing.T) *domain.SessionMessageQueue {
	t.Helper()
	q, err := domain.NewSessionMessageQueue(sessionID, ownerID)
	require.NoError(t, err)
	return q
}

func TestQueueEnqueueValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		content  string
		priority domain.MessagePriority
		source   domain.MessageSource
		status   domain.SessionStatus
		wantErr  error
	}{
		{"one character", "x", domain.PriorityQueued, domain.MessageFromUser, domain.StatusRunning, nil},
		{"4000 characters", strings.Repeat("é", 4000), domain.PriorityQueued, domain.MessageFromUser, domain.StatusIdle, nil},
		{"waits while waiting for input", "later", domain.PriorityImmediate, domain.MessageFromSystem, domain.StatusWaitingForInput, nil},
		{"waits while waiting for approval", "later", domain.PriorityQueued, domain.MessageFromWebhook, domain.StatusWaitingForApproval, nil},
		{"empty", "", domain.PriorityQueued, domain.MessageFromUser, domain.StatusRunning, domain.ErrValidation},
		{"blank", "  \n", domain.PriorityQueued, domain.MessageFromUser, domain.StatusRunning, domain.ErrValidation},
		{"4001 characters", strings.Repeat("a", 4001), domain.PriorityQueued, domain.MessageFromUser, domain.StatusRunning, domain.ErrValidation},
		{"unknown priority", "x", "Soon", domain.MessageFromUser, domain.StatusRunning, domain.ErrValidation},
		{"unknown source", "x", domain.PriorityQueued, "Agent", domain.StatusRunning, domain.ErrValidation},
		{"context exhausted", "x", domain.PriorityQueued, domain.MessageFromUser, domain.StatusContextExhausted, domain.ErrConflict},
		{"completed", "x", domain.PriorityQueued, domain.MessageFromUser, domain.StatusCompleted, domain.ErrConflict},
		{"cancelled", "x", domain.PriorityQueued, domain.MessageFromUser, domain.StatusCancelled, domain.ErrConflict},
		{"failed", "x", domain.PriorityQueued, domain.MessageFromUser, domain.StatusFailed, domain.ErrConflict},
		{"cancelling", "x", domain.PriorityQueued, domain.MessageFromUser, domain.StatusCancelling, domain.ErrConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := newQueue(t)
			m, err := q.Enqueue(uuid.New(), tt.content, tt.priority, tt.source, tt.status, t0)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Empty(t, q.Messages())
				assert.Empty(t, q.PopEvents())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, domain.MessagePending, m.Status)
			e := q.PopEvents()
			require.Len(t, e, 1)
			ev := e[0].(domain.MessageEnqueuedEvent)
			assert.Equal(t, m.MessageID, ev.MessageID)
			assert.Equal(t, tt.priority, ev.Priority)
			assert.Equal(t, tt.content, ev.Content, "the event carries the message")
			assert.Equal(t, tt.status, ev.SessionStatus, "and the status it met")
			assert.Equal(t, domain.AggregateQueue, ev.AggregateType())
			assert.Equal(t, sessionID, ev.AggregateID())
		})
	}
}

func TestQueueOrderAndRules(t *testing.T) {
	t.Parallel()
	q := newQueue(t)
	ids := seqIDs()
	a, b, c, d := ids(), ids(), ids(), ids()
	_, err := q.Enqueue(a, "follow-up 1", domain.PriorityQueued, domain.MessageFromUser, domain.StatusRunning, t0)
	require.NoError(t, err)
	_, err = q.Enqueue(b, "follow-up 2", domain.PriorityQueued, domain.MessageFromUser, domain.StatusRunning, t0.Add(1))
	require.NoError(t, err)
	_, err = q.Enqueue(c, "steer", domain.PriorityImmediate, domain.MessageFromUser, domain.StatusRunning, t0.Add(2))
	require.NoError(t, err)

	_, err = q.Enqueue(a, "again", domain.PriorityQueued, domain.MessageFromUser, domain.StatusRunning, t0)
	require.ErrorIs(t, err, domain.ErrDuplicate, "message ids are unique")

	order := func() []uuid.UUID {
		var out []uuid.UUID
		for _, m := range q.Pending() {
			out = append(out, m.MessageID)
		}
		return out
	}
	assert.Equal(t, []uuid.UUID{c, a, b}, order(), "Immediate first, then FIFO")

	require.NoError(t, q.Promote(b, t0))
	assert.Equal(t, []uuid.UUID{b, c, a}, order(), "a promoted message keeps its age among Immediate ones")
	require.ErrorIs(t, q.Promote(b, t0), domain.ErrConflict, "already Immediate")

	require.NoError(t, q.MarkDelivered(b, t0))
	require.ErrorIs(t, q.Cancel(b, t0), domain.ErrConflict, "a delivered message cannot be cancelled")
	require.ErrorIs(t, q.Promote(b, t0), domain.ErrConflict)
	require.ErrorIs(t, q.MarkDelivered(b, t0), domain.ErrConflict)
	require.ErrorIs(t, q.Cancel(d, t0), domain.ErrNotFound)

	require.NoError(t, q.Cancel(a, t0))
	require.ErrorIs(t, q.Cancel(a, t0), domain.ErrConflict)
	assert.Equal(t, []uuid.UUID{c}, order())

	msg, ok := q.Message(b)
	require.True(t, ok)
	require.NotNil(t, msg.DeliveredAt)
	assert.Equal(t, []string{"message_enqueued", "message_enqueued", "message_enqueued",
		"message_promoted_to_immediate", "message_delivered", "message_cancelled"}, eventTypes(q.PopEvents()))

	// Delivered and cancelled messages leave the queue: it stores only
	// what still waits, and the next message still gets a new sequence.
	settled := q.Settled()
	require.Len(t, settled, 2)
	assert.Equal(t, []uuid.UUID{b, a}, []uuid.UUID{settled[0].MessageID, settled[1].MessageID})
	assert.Equal(t, domain.MessageDelivered, settled[0].Status)
	assert.Equal(t, domain.MessageCancelled, settled[1].Status)
	snap := q.Snapshot()
	require.Len(t, snap.Messages, 1)
	assert.Equal(t, c, snap.Messages[0].MessageID)
	assert.Equal(t, int64(3), snap.NextSequence)

	re, err := domain.UnmarshalSessionMessageQueueFromDatabase(snap)
	require.NoError(t, err)
	assert.Empty(t, re.Settled())
	require.ErrorIs(t, re.Cancel(b, t0), domain.ErrNotFound, "a message nobody recalled is unknown")
	re.Recall(b, domain.MessageDelivered)
	re.Recall(a, domain.MessageCancelled)
	var te *domain.TransitionError
	require.ErrorAs(t, re.Cancel(b, t0), &te)
	assert.Equal(t, string(domain.MessageDelivered), te.CurrentStatus(), "a recalled message is refused for its status")
	_, err = re.Enqueue(a, "again", domain.PriorityQueued, domain.MessageFromUser, domain.StatusRunning, t0)
	require.ErrorIs(t, err, domain.ErrDuplicate, "the id of a message that left is not taken again")
	m, err := re.Enqueue(d, "next", domain.PriorityQueued, domain.MessageFromUser, domain.StatusRunning, t0)
	require.NoError(t, err)
	assert.Equal(t, int64(3), m.Sequence)

	bad := snap
	bad.Messages = []domain.SessionMessage{settled[0]}
	_, err = domain.UnmarshalSessionMessageQueueFromDatabase(bad)
	require.ErrorIs(t, err, domain.ErrValidation, "a stored queue holds Pending messages only")
}

func TestQueueNextPendingWaitsForTheSession(t *testing.T) {
	t.Parallel()
	q := newQueue(t)
	ids := seqIDs()
	queued, steer := ids(), ids()
	_, err := q.Enqueue(queued, "next task", domain.PriorityQueued, domain.MessageFromUser, domain.StatusRunning, t0)
	require.NoError(t, err)

	tests := []struct {
		status domain.SessionStatus
		want   bool
	}{
		{domain.StatusRunning, false}, // a queued message waits for the turn to end
		{domain.StatusIdle, true},
		{domain.StatusInterrupted, true},
		{domain.StatusWaitingForInput, false},
		{domain.StatusWaitingForApproval, false},
		{domain.StatusPaused, false},
		{domain.StatusQueued, false},
	}
	for _, tt := range tests {
		_, ok := q.NextPending(tt.status)
		assert.Equal(t, tt.want, ok, "queued message in %s", tt.status)
	}

	_, err = q.Enqueue(steer, "focus on tests", domain.PriorityImmediate, domain.MessageFromUser, domain.StatusRunning, t0.Add(1))
	require.NoError(t, err)
	next, ok := q.NextPending(domain.StatusRunning)
	require.True(t, ok)
	assert.Equal(t, steer, next.MessageID, "a running turn takes steering messages")
	_, ok = q.NextPending(domain.StatusWaitingForInput)
	assert.False(t, ok, "even steering waits while the agent waits for an answer")
}
