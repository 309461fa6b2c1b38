package domain_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
)

func newChain(t *testing.T, first uuid.UUID) *domain.SessionChain {
	t.Helper()
	c, err := domain.NewSessionChain(uuid.New(), ownerID, "Port the parser to Go", first, t0)
	require.NoError(t, err)
	return c
}

func TestSessionChainHandoffs(t *testing.T) {
	t.Parallel()
	ids := seqIDs()
	s1, s2, s3 := ids(), ids(), ids()
	c := newChain(t, s1)
	assert.Equal(t, s1, c.CurrentSessionID())
	assert.Empty(t, c.HandoffDocuments(), "a chain that never handed off has no documents")

	// A chain may also grow without a handoff document.
	_, err := c.InitiateHandoff(ids(), s2, "sum", "rest", "", t0)
	require.ErrorIs(t, err, domain.ErrNotCurrentSession)

	doc1 := ids()
	h, err := c.InitiateHandoff(doc1, s1, "parsed expressions", "statements", "use Pratt parsing", t0)
	require.NoError(t, err)
	assert.True(t, h.IsPending())
	_, err = c.InitiateHandoff(ids(), s1, "again", "again", "", t0)
	require.ErrorIs(t, err, domain.ErrHandoffPending)

	require.NoError(t, c.AttachSession(s2, t0))
	assert.Equal(t, s2, c.CurrentSessionID())
	docs := c.HandoffDocuments()
	require.Len(t, docs, 1)
	assert.Equal(t, s2, docs[0].ToSessionID, "attaching fills the placeholder")
	require.ErrorIs(t, c.AttachSession(s2, t0), domain.ErrDuplicate)

	_, err = c.InitiateHandoff(ids(), s2, "statements", "printer", "", t0)
	require.NoError(t, err)
	require.NoError(t, c.AttachSession(s3, t0))

	sessions := c.Sessions()
	require.Len(t, sessions, 3)
	for i, s := range sessions {
		assert.Equal(t, i+1, s.Position, "positions are contiguous from 1")
	}
	for _, d := range c.HandoffDocuments() {
		from := slicesIndex(sessions, d.FromSessionID)
		to := slicesIndex(sessions, d.ToSessionID)
		assert.Equal(t, from+1, to, "handoffs link adjacent sessions")
	}

	require.ErrorIs(t, c.Complete(domain.StatusRunning, 0, t0), domain.ErrConflict, "the current session must be Idle or Completed")
	require.NoError(t, c.Complete(domain.StatusIdle, domain.Dollars(12), t0.Add(9)))
	assert.Equal(t, domain.ChainCompleted, c.Status())
	assert.Equal(t, t0.Add(9), *c.CompletedAt())
	require.ErrorIs(t, c.AttachSession(ids(), t0), domain.ErrInvalidTransition, "a completed chain takes no sessions")
	require.ErrorIs(t, c.Cancel(t0), domain.ErrInvalidTransition)

	events := c.PopEvents()
	assert.Equal(t, []string{"session_chain_created", "session_handoff_initiated", "session_added_to_chain",
		"session_handoff_initiated", "session_added_to_chain", "session_chain_completed"}, eventTypes(events))
	done := events[5].(domain.SessionChainCompletedEvent)
	assert.Equal(t, 3, done.TotalSessions)
	assert.Equal(t, domain.Dollars(12), done.TotalCostUsd)

	re, err := domain.UnmarshalSessionChainFromDatabase(c.Snapshot())
	require.NoError(t, err)
	assert.Equal(t, c.Snapshot(), re.Snapshot())
}

func slicesIndex(s []domain.ChainedSession, id uuid.UUID) int {
	for i, cs := range s {
		if cs.SessionID == id {
			return i
		}
	}
	return -1
}

func TestSessionChainValidation(t *testing.T) {
	t.Parallel()
	_, err := domain.NewSessionChain(uuid.New(), ownerID, strings.Repeat("x", 2001), uuid.New(), t0)
	require.ErrorIs(t, err, domain.ErrValidation)
	_, err = domain.NewSessionChain(uuid.New(), ownerID, "", uuid.New(), t0)
	require.ErrorIs(t, err, domain.ErrValidation)

	first := uuid.New()
	c := newChain(t, first)
	tests := []struct {
		name, summary, remaining string
	}{
		{"empty summary", "", "rest"},
		{"empty remaining work", "sum", ""},
		{"summary too long", strings.Repeat("s", 4001), "rest"},
		{"remaining work too long", "sum", strings.Repeat("r", 4001)},
	}
	for _, tt := range tests {
		_, err := c.InitiateHandoff(uuid.New(), first, tt.summary, tt.remaining, "", t0)
		require.ErrorIs(t, err, domain.ErrValidation, tt.name)
	}
	require.NoError(t, c.Cancel(t0))
	assert.Equal(t, domain.ChainCancelled, c.Status())
	require.NotNil(t, c.CompletedAt())
	_, err = c.InitiateHandoff(uuid.New(), first, "s", "r", "", t0)
	require.ErrorIs(t, err, domain.ErrInvalidTransition)
}

func TestSessionChainUnmarshalChecksInvariants(t *testing.T) {
	t.Parallel()
	ids := seqIDs()
	s1, s2 := ids(), ids()
	c := newChain(t, s1)
	_, err := c.InitiateHandoff(ids(), s1, "s", "r", "", t0)
	require.NoError(t, err)
	require.NoError(t, c.AttachSession(s2, t0))

	tests := []struct {
		name   string
		mutate func(*domain.SessionChainSnapshot)
	}{
		{"gap in positions", func(s *domain.SessionChainSnapshot) { s.Sessions[1].Position = 3 }},
		{"handoff not adjacent", func(s *domain.SessionChainSnapshot) { s.HandoffDocuments[0].ToSessionID = s1 }},
		{"pending handoff from an old session", func(s *domain.SessionChainSnapshot) { s.HandoffDocuments[0].ToSessionID = uuid.Nil }},
		{"closed without CompletedAt", func(s *domain.SessionChainSnapshot) { s.Status = domain.ChainCompleted }},
		{"no sessions", func(s *domain.SessionChainSnapshot) { s.Sessions = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := c.Snapshot()
			tt.mutate(&snap)
			_, err := domain.UnmarshalSessionChainFromDatabase(snap)
			require.ErrorIs(t, err, domain.ErrValidation)
		})
	}
}

func TestAChainHasRoomForAsManySessionsAsItsLimit(t *testing.T) {
	t.Parallel()
	ids := seqIDs()
	current := ids()
	c := newChain(t, current)
	require.NoError(t, c.EnsureRoomForSession(2))
	_, err := c.InitiateHandoff(ids(), current, "done", "rest", "", t0)
	require.NoError(t, err)
	current = ids()
	require.NoError(t, c.AttachSession(current, t0))
	err = c.EnsureRoomForSession(2)
	require.ErrorIs(t, err, domain.ErrChainLimitReached)
	require.ErrorIs(t, err, domain.ErrConflict)

	for range domain.DefaultMaxChainSessions - 2 {
		require.NoError(t, c.EnsureRoomForSession(0), "no limit set means the default")
		_, err := c.InitiateHandoff(ids(), current, "done", "rest", "", t0)
		require.NoError(t, err)
		current = ids()
		require.NoError(t, c.AttachSession(current, t0))
	}
	assert.Len(t, c.Sessions(), domain.DefaultMaxChainSessions)
	require.ErrorIs(t, c.EnsureRoomForSession(0), domain.ErrChainLimitReached)
}

func TestAHandoffThatCannotContinueFailsTheSession(t *testing.T) {
	t.Parallel()
	s := load(t, snapshotIn(t, domain.StatusContextExhausted))
	require.NoError(t, s.FailHandoff("the chain holds 10 sessions", t0))
	assert.Equal(t, domain.StatusFailed, s.Status())
	assert.Equal(t, &domain.Failure{Reason: domain.FailureBudgetExhausted, Message: "the chain holds 10 sessions"}, s.Failure())
	assert.Equal(t, []string{"agent_session_failed"}, eventTypes(s.PopEvents()))
}
