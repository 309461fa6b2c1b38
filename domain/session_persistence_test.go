package domain_test

import (
	"crypto/rand"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
)

func TestAPIKey(t *testing.T) {
	t.Parallel()
	s, err := domain.NewAgentSession(newSessionParams())
	require.NoError(t, err)
	assert.False(t, s.VerifyAPIKey("abk_anything"))
	key, err := s.GenerateAPIKey(entropy())
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(key, domain.APIKeyPrefix))
	assert.Len(t, s.APIKeyHash(), 64)
	assert.Equal(t, domain.HashAPIKey(key), s.APIKeyHash(), "only the SHA-256 is kept")
	assert.NotContains(t, s.APIKeyHash(), key)
	assert.True(t, s.VerifyAPIKey(key))
	assert.False(t, s.VerifyAPIKey(key+"x"))

	_, err = s.GenerateAPIKey(strings.NewReader("short"))
	require.Error(t, err, "a short random source is an error, not a weak key")
	_, err = s.GenerateAPIKey(nil)
	require.ErrorIs(t, err, domain.ErrValidation)

	require.NoError(t, s.Start(t0))
	_, err = s.GenerateAPIKey(entropy())
	require.ErrorIs(t, err, domain.ErrInvalidTransition, "the hash is immutable once started")
	assert.True(t, s.VerifyAPIKey(key))
}

func TestSidecarKey(t *testing.T) {
	t.Parallel()
	s, err := domain.NewAgentSession(newSessionParams())
	require.NoError(t, err)
	own, err := s.GenerateAPIKey(entropy())
	require.NoError(t, err)
	_, err = s.IssueSidecarKey(rand.Reader, "script")
	require.ErrorIs(t, err, domain.ErrInvalidTransition, "a Queued session has no sidecar yet")

	require.NoError(t, s.Start(t0))
	first, err := s.IssueSidecarKey(rand.Reader, "script")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(first, domain.APIKeyPrefix))
	assert.Equal(t, domain.HashAPIKey(first), s.SidecarKeyHash(), "only the SHA-256 is kept")
	assert.NotEqual(t, own, first)
	assert.True(t, s.VerifyAPIKey(first))
	assert.True(t, s.VerifyAPIKey(own), "the session's own key stays valid")

	second, err := s.IssueSidecarKey(rand.Reader, "script")
	require.NoError(t, err)
	assert.True(t, s.VerifyAPIKey(second))
	assert.False(t, s.VerifyAPIKey(first), "a new sidecar key replaces the previous one")
	assert.True(t, s.VerifyAPIKey(own))
	assert.Equal(t, s.SidecarKeyHash(), load(t, s.Snapshot()).SidecarKeyHash(), "the hash survives a save")

	// The first key pinned the engine: a runtime of another is refused.
	assert.Equal(t, "script", load(t, s.Snapshot()).Engine(), "the engine survives a save")
	_, err = s.IssueSidecarKey(rand.Reader, "claude")
	require.ErrorIs(t, err, domain.ErrEngineMismatch)
	require.ErrorIs(t, err, domain.ErrConflict)
	assert.True(t, s.VerifyAPIKey(second), "a refused runtime replaced nothing")
	_, err = s.IssueSidecarKey(rand.Reader, "")
	require.ErrorIs(t, err, domain.ErrValidation)

	_, err = s.IssueSidecarKey(nil, "script")
	require.ErrorIs(t, err, domain.ErrValidation)
	require.NoError(t, s.RequestCancel(t0))
	require.NoError(t, s.ConfirmCancelled(awaited(t, s, domain.SidecarStop), t0))
	_, err = s.IssueSidecarKey(rand.Reader, "script")
	require.ErrorIs(t, err, domain.ErrInvalidTransition, "an ended session gets no sidecar")
}

func TestSnapshotRoundTrip(t *testing.T) {
	t.Parallel()
	s := runningSession(t)
	sub := uuid.New()
	u := usage("opus", domain.Dollars(1), 1, 2, 3)
	u.SubAgentID = &sub
	require.NoError(t, s.UpdateMetrics(u, t0))
	require.NoError(t, s.UpdateSessionTaskList([]domain.SessionTask{{ID: "1", Subject: "a", Status: domain.TaskPending}}, t0))
	require.NoError(t, s.RecordUserQuestionAsked("?", []string{"a"}, t0))

	snap := s.Snapshot()
	re := load(t, snap)
	assert.Equal(t, snap, re.Snapshot())
	assert.Empty(t, re.PopEvents(), "loading raises nothing")

	snap.Metrics.TokenUsageByModel["opus"] = domain.TokenUsage{}
	assert.NotEqual(t, snap.Metrics.TokenUsageByModel["opus"], s.Metrics().TokenUsageByModel["opus"], "snapshots do not alias the aggregate")

	bad := s.Snapshot()
	bad.Status = "Sleeping"
	_, err := domain.UnmarshalAgentSessionFromDatabase(bad)
	require.ErrorIs(t, err, domain.ErrValidation)
	bad = s.Snapshot()
	bad.PendingQuestion = nil
	_, err = domain.UnmarshalAgentSessionFromDatabase(bad)
	require.ErrorIs(t, err, domain.ErrValidation, "a session waiting for input has a question")
}
