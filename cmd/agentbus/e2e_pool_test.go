package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	agentcmd "github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	cmdhandlers "github.com/agentbus/agentbus/handlers/commands"
	"github.com/agentbus/agentbus/handlers/reactions"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// TestPool runs the session pool through the whole system: slots freed
// together, a retried session, and a user's own maximum.
func TestPool(t *testing.T) {
	s := startSystem(t)

	t.Run("EverySlotFreedAtOnceIsTaken", func(t *testing.T) {
		owner := s.owner()
		running := make([]uuid.UUID, domain.DefaultMaxConcurrentSessions)
		for i := range running {
			running[i] = s.startSession(t, owner, agentcmd.StartSessionData{})
		}
		queued := make([]uuid.UUID, 9*domain.DefaultMaxConcurrentSessions)
		for i := range queued {
			queued[i] = s.startSession(t, owner, agentcmd.StartSessionData{Objective: "Waits for a slot"})
		}
		for _, id := range running {
			s.waitStatus(t, id, domain.StatusRunning)
			s.sidecar(id).waitStarted(t)
		}
		// Every Queued session was refused a slot before any is freed, so
		// only the releases can start them.
		for _, id := range queued {
			s.waitEvent(t, domain.AggregateSession, id, "session_pool_exhausted")
		}
		s.waitIdle(t)

		var wg sync.WaitGroup
		errs := make(chan error, len(running))
		for _, id := range running {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- s.try(owner, agentcmd.CancelSession, id)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		stops := make([]sidecarCommand, len(running))
		for i, id := range running {
			stops[i] = s.sidecar(id).waitCommand(t, protocol.CommandStop, 1)[0]
		}
		for i, id := range running {
			sc := s.sidecar(id)
			sc.send(t, protocol.EventStopAck, map[string]any{"command_id": stops[i].CommandID, "forced": false})
			sc.end(t, "stopped")
		}

		require.Eventually(t, func() bool { return s.countStatus(t, queued, domain.StatusRunning) == len(running) },
			4*wait, 50*time.Millisecond, "the %d slots freed at once were not all taken", len(running))
		s.waitIdle(t)
		assert.Equal(t, len(running), s.countStatus(t, queued, domain.StatusRunning))
		assert.Equal(t, len(queued)-len(running), s.countStatus(t, queued, domain.StatusQueued))
		for _, id := range queued[:len(running)] {
			assert.Equal(t, domain.StatusRunning, s.session(t, id).Status(), "the oldest Queued sessions start first")
		}
	})

	t.Run("RetriedSessionIsAllocated", func(t *testing.T) {
		owner := s.owner()
		id, sc := s.runningSession(t, owner, agentcmd.StartSessionData{})
		sc.waitStarted(t)
		s.do(t, "", domain.AggregateSession, agentcmd.RecordFailure, id,
			agentcmd.FailureData{Reason: domain.FailureAgentError, Message: "the agent crashed"})
		s.waitStatus(t, id, domain.StatusFailed)
		// The slot is back before the retry, so the release has nothing to start.
		s.waitEvent(t, domain.AggregateSession, id, "session_released")
		s.waitIdle(t)

		s.do(t, owner, domain.AggregateSession, agentcmd.RetrySession, id, agentcmd.RetryData{})
		s.waitStatus(t, id, domain.StatusRunning)
		s.waitIdle(t)
		assertInOrder(t, s.events(t, domain.AggregateSession, id), "agent_session_failed", "session_released",
			"agent_session_retried", "session_allocated", "agent_session_started")
	})
}

// try sends a command as owner and returns its transport error or refusal,
// for goroutines that must not stop the test.
func (s *system) try(owner, name string, id uuid.UUID) error {
	cmd, err := agentcmd.New(domain.AggregateSession, name, id, owner, nil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	r, err := s.client.Do(ctx, cmd)
	if err != nil {
		return err
	}
	return r.Err()
}

// countStatus counts the sessions among ids that are in status.
func (s *system) countStatus(t *testing.T, ids []uuid.UUID, status domain.SessionStatus) int {
	t.Helper()
	var n int
	require.NoError(t, s.in.Pool.QueryRow(context.Background(),
		"SELECT count(*) FROM sessions WHERE id = ANY($1) AND status = $2", ids, string(status)).Scan(&n))
	return n
}

// waitIdle waits until the commands worker and the pool reaction have
// handled everything sent to them and the outbox is published. Work moves
// between them, so they must look idle several times in a row.
func (s *system) waitIdle(t *testing.T) {
	t.Helper()
	idle := func() bool {
		var unpublished int
		err := s.in.Pool.QueryRow(context.Background(), "SELECT count(*) FROM outbox").Scan(&unpublished)
		return err == nil && unpublished == 0 &&
			!s.consumerHasWork(bus.StreamEvents, reactions.PoolConsumer) &&
			!s.consumerHasWork(bus.StreamCommands, cmdhandlers.Consumer)
	}
	calm := 0
	require.Eventually(t, func() bool {
		if idle() {
			calm++
		} else {
			calm = 0
		}
		return calm >= 5
	}, 2*wait, 50*time.Millisecond, "the commands worker and the pool reaction never caught up")
}
