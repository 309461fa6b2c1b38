package domain_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
)

// TestOnlyTheAwaitedCommandsAckConfirms: each two-phase control confirms
// only the ack echoing the id of the command its request named; a stray
// ack (an unknown id, or another control's) changes nothing and raises
// nothing, and the awaited ack still confirms afterwards.
func TestOnlyTheAwaitedCommandsAckConfirms(t *testing.T) {
	t.Parallel()
	type control struct {
		from    domain.SessionStatus
		cmd     domain.SidecarCommand
		request func(*domain.AgentSession) error
		confirm func(*domain.AgentSession, uuid.UUID) error
		to      domain.SessionStatus
	}
	at := func(f func(*domain.AgentSession, time.Time) error) func(*domain.AgentSession) error {
		return func(s *domain.AgentSession) error { return f(s, t0) }
	}
	ack := func(f func(*domain.AgentSession, uuid.UUID, time.Time) error) func(*domain.AgentSession, uuid.UUID) error {
		return func(s *domain.AgentSession, id uuid.UUID) error { return f(s, id, t0) }
	}
	controls := map[string]control{
		"interrupt": {domain.StatusRunning, domain.SidecarInterrupt, at((*domain.AgentSession).RequestInterrupt),
			ack((*domain.AgentSession).ConfirmInterrupted), domain.StatusInterrupted},
		"pause": {domain.StatusRunning, domain.SidecarPause, at((*domain.AgentSession).RequestPause),
			ack((*domain.AgentSession).ConfirmPaused), domain.StatusPaused},
		"resume": {domain.StatusPaused, domain.SidecarResume, at((*domain.AgentSession).RequestResume),
			ack((*domain.AgentSession).ConfirmResumed), domain.StatusRunning},
		"stop": {domain.StatusRunning, domain.SidecarStop, at((*domain.AgentSession).RequestCancel),
			ack((*domain.AgentSession).ConfirmCancelled), domain.StatusCancelled},
		"reload": {domain.StatusIdle, domain.SidecarReload, at((*domain.AgentSession).RequestReload),
			ack((*domain.AgentSession).ConfirmReloaded), domain.StatusIdle},
	}
	for name, c := range controls {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := load(t, snapshotIn(t, c.from))
			require.NoError(t, c.request(s))
			events := s.PopEvents()
			require.NotEmpty(t, events)
			sent := awaited(t, s, c.cmd)
			assert.Equal(t, sent, commandIDOf(t, events[len(events)-1]), "the request names the command it awaits")
			before := s.Snapshot()

			for what, stray := range map[string]uuid.UUID{"unknown id": uuid.New(), "no id": uuid.Nil} {
				require.ErrorIs(t, c.confirm(s, stray), domain.ErrUnexpectedAck, what)
				assert.Equal(t, before, s.Snapshot(), "a stray ack (%s) changes nothing", what)
				assert.Empty(t, s.PopEvents(), what)
			}

			require.NoError(t, c.confirm(s, sent))
			assert.Equal(t, c.to, s.Status())
			assert.NotEmpty(t, s.PopEvents())
			assert.Empty(t, s.AwaitedAcks())
			require.ErrorIs(t, c.confirm(s, sent), domain.ErrConflict, "a repeated ack confirms nothing more")
		})
	}
}

// TestAnAckOfAnotherControlIsAStray: a pause_ack echoing an interrupt's
// id, say, does not confirm the pause.
func TestAnAckOfAnotherControlIsAStray(t *testing.T) {
	t.Parallel()
	s := load(t, snapshotIn(t, domain.StatusRunning))
	require.NoError(t, s.RequestInterrupt(t0))
	interrupt := awaited(t, s, domain.SidecarInterrupt)
	require.NoError(t, s.ConfirmInterrupted(interrupt, t0))
	require.NoError(t, s.BeginTurn(t0))
	require.NoError(t, s.RequestPause(t0))
	require.ErrorIs(t, s.ConfirmPaused(interrupt, t0), domain.ErrUnexpectedAck)
	assert.Equal(t, domain.StatusPausing, s.Status())
	require.NoError(t, s.ConfirmPaused(awaited(t, s, domain.SidecarPause), t0))
	assert.Equal(t, domain.StatusPaused, s.Status())
}

func commandIDOf(t *testing.T, e domain.Event) uuid.UUID {
	t.Helper()
	switch e := e.(type) {
	case domain.SessionInterruptRequestedEvent:
		return e.CommandID
	case domain.SessionPauseRequestedEvent:
		return e.CommandID
	case domain.SessionResumeRequestedEvent:
		return e.CommandID
	case domain.SessionCancelRequestedEvent:
		return e.CommandID
	case domain.SessionReloadRequestedEvent:
		return e.CommandID
	}
	t.Fatalf("%s names no sidecar command", e.EventType())
	return uuid.Nil
}
