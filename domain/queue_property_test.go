package domain_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
)

// modelMsg is the test's own record of a message, kept independently of
// the queue to check it.
type modelMsg struct {
	id       uuid.UUID
	priority domain.MessagePriority
	status   domain.MessageStatus
	created  time.Time
	order    int // enqueue order
}

// TestQueueProperties applies thousands of random operations to a queue
// and after each one checks the queue against a simple model: which calls
// succeed (cancel only Pending, promote only Pending Queued, deliver only
// Pending, enqueue only for sessions that accept messages), the delivery
// order (Immediate before Queued, FIFO within each) and what may be
// delivered in each session status.
func TestQueueProperties(t *testing.T) {
	t.Parallel()
	const seeds, opsPerSeed = 20, 600
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			t.Parallel()
			runQueueProperty(t, seed, opsPerSeed)
		})
	}
}

func runQueueProperty(t *testing.T, seed uint64, ops int) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	q, err := domain.NewSessionMessageQueue(sessionID, ownerID)
	require.NoError(t, err)
	statuses := domain.AllSessionStatuses()
	var model []*modelMsg
	now := t0
	pick := func() uuid.UUID {
		if len(model) == 0 || rng.IntN(10) == 0 {
			return uuid.New() // sometimes an unknown id
		}
		return model[rng.IntN(len(model))].id
	}
	find := func(id uuid.UUID) *modelMsg {
		for _, m := range model {
			if m.id == id {
				return m
			}
		}
		return nil
	}

	for i := range ops {
		if rng.IntN(3) > 0 { // time mostly moves on, sometimes stands still
			now = now.Add(time.Duration(rng.IntN(1000)+1) * time.Millisecond)
		}
		switch op := rng.IntN(10); {
		case op < 4: // enqueue
			st := statuses[rng.IntN(len(statuses))]
			if rng.IntN(3) > 0 {
				st = domain.StatusRunning
			}
			prio := domain.PriorityQueued
			if rng.IntN(3) == 0 {
				prio = domain.PriorityImmediate
			}
			id := uuid.New()
			_, err := q.Enqueue(id, fmt.Sprintf("message %d", i), prio, domain.MessageFromUser, st, now)
			if st.AcceptsMessages() {
				require.NoError(t, err)
				model = append(model, &modelMsg{id: id, priority: prio, status: domain.MessagePending, created: now, order: len(model)})
			} else {
				requireConflict(t, err, "Enqueue", string(st))
			}
		case op < 6: // cancel
			id := pick()
			err := q.Cancel(id, now)
			checkPendingOnly(t, find(id), err, "Cancel")
			if err == nil {
				find(id).status = domain.MessageCancelled
			}
		case op < 8: // promote
			id := pick()
			m := find(id)
			err := q.Promote(id, now)
			switch {
			case m != nil && m.status == domain.MessagePending && m.priority == domain.PriorityImmediate:
				requireConflict(t, err, "Promote", string(domain.PriorityImmediate))
			default:
				checkPendingOnly(t, m, err, "Promote")
			}
			if err == nil {
				m.priority = domain.PriorityImmediate
			}
		default: // deliver what the queue says is next, or a random message
			st := statuses[rng.IntN(len(statuses))]
			next, ok := q.NextPending(st)
			checkNext(t, model, st, next, ok)
			id := pick()
			if ok && rng.IntN(2) == 0 {
				id = next.MessageID
			}
			err := q.MarkDelivered(id, now)
			checkPendingOnly(t, find(id), err, "MarkDelivered")
			if err == nil {
				find(id).status = domain.MessageDelivered
			}
		}
		checkPendingOrder(t, q, model)
		if i%100 == 99 { // persistence keeps the queue as it was
			// The store keeps the Pending messages; those that left
			// are recalled from the session's message history.
			re, err := domain.UnmarshalSessionMessageQueueFromDatabase(q.Snapshot())
			require.NoError(t, err)
			require.Equal(t, q.Snapshot(), re.Snapshot())
			for _, m := range model {
				if m.status != domain.MessagePending {
					re.Recall(m.id, m.status)
				}
			}
			q = re
		}
	}
}

// checkPendingOnly: an operation reserved for Pending messages succeeds
// exactly for them; unknown ids are not found, others are a conflict
// naming the message's status.
func checkPendingOnly(t *testing.T, m *modelMsg, err error, op string) {
	t.Helper()
	switch {
	case m == nil:
		require.ErrorIs(t, err, domain.ErrNotFound)
	case m.status != domain.MessagePending:
		requireConflict(t, err, op, string(m.status))
	default:
		require.NoError(t, err)
	}
}

func requireConflict(t *testing.T, err error, op, status string) {
	t.Helper()
	var te *domain.TransitionError
	require.ErrorAs(t, err, &te)
	require.Equal(t, op, te.Operation)
	require.Equal(t, status, te.CurrentStatus())
}

// checkPendingOrder: Pending() holds exactly the model's pending messages,
// Immediate ones first, each priority in creation (then enqueue) order.
func checkPendingOrder(t *testing.T, q *domain.SessionMessageQueue, model []*modelMsg) {
	t.Helper()
	pending := q.Pending()
	want := 0
	order := map[uuid.UUID]*modelMsg{}
	for _, m := range model {
		if m.status == domain.MessagePending {
			want++
			order[m.id] = m
		}
	}
	require.Len(t, pending, want)
	for i, p := range pending {
		m := order[p.MessageID]
		require.NotNil(t, m, "pending message %s is not pending in the model", p.MessageID)
		require.Equal(t, m.priority, p.Priority)
		if i == 0 {
			continue
		}
		prev := order[pending[i-1].MessageID]
		if prev.priority != m.priority {
			require.Equal(t, domain.PriorityImmediate, prev.priority, "Immediate messages come first")
			continue
		}
		require.False(t, m.created.Before(prev.created), "FIFO within a priority")
		if m.created.Equal(prev.created) {
			require.Less(t, prev.order, m.order, "ties keep enqueue order")
		}
	}
}

// checkNext: in Idle and Interrupted the next message is the first
// pending one; a Running turn only takes Immediate messages; every other
// status (waiting for input or approval, transitions, paused, ended)
// delivers nothing.
func checkNext(t *testing.T, model []*modelMsg, st domain.SessionStatus, next domain.SessionMessage, ok bool) {
	t.Helper()
	var first *modelMsg
	for _, m := range model {
		if m.status != domain.MessagePending {
			continue
		}
		if first == nil || m.priority == domain.PriorityImmediate && first.priority == domain.PriorityQueued ||
			m.priority == first.priority && m.created.Before(first.created) {
			first = m
		}
	}
	switch {
	case first == nil:
		assert.False(t, ok)
	case st == domain.StatusIdle || st == domain.StatusInterrupted:
		require.True(t, ok)
		assert.Equal(t, first.id, next.MessageID)
	case st == domain.StatusRunning && first.priority == domain.PriorityImmediate:
		require.True(t, ok)
		assert.Equal(t, first.id, next.MessageID)
	default:
		assert.False(t, ok, "nothing is delivered to a %s session (first pending is %s)", st, first.priority)
	}
}
