package reactions_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// waitContinued waits until the chain of first holds two sessions and
// returns it with the continuation session.
func (f *flow) waitContinued(t *testing.T, first uuid.UUID) (*domain.SessionChain, *domain.AgentSession) {
	t.Helper()
	var c *domain.SessionChain
	require.Eventually(t, func() bool {
		var err error
		c, err = postgres.Chains{}.GetBySession(context.Background(), f.pool, first)
		return err == nil && len(c.Sessions()) == 2
	}, 30*time.Second, 20*time.Millisecond, "the work of %s never continued in a chain", first)
	next, err := postgres.Sessions{}.Get(context.Background(), f.pool, c.CurrentSessionID())
	require.NoError(t, err)
	return c, next
}

// chainSessions counts the sessions that say they belong to the chain.
func (f *flow) chainSessions(t *testing.T, chain uuid.UUID) int {
	var n int
	require.NoError(t, f.pool.QueryRow(context.Background(), "SELECT count(*) FROM sessions WHERE chain_id = $1", chain).Scan(&n))
	return n
}

func TestContextExhaustionContinuesTheWorkInAChain(t *testing.T) {
	f := startFlow(t, 0)
	first := f.start(t)
	f.waitStatus(t, first, domain.StatusRunning)

	f.raw(t, first, protocol.EventContextNearingLimit, protocol.ContextNearingLimit{Percent: 86, UsedTokens: 172000, MaxTokens: 200000})
	f.raw(t, first, protocol.EventContextExhausted, protocol.ContextExhausted{Percent: 100, UsedTokens: 200000, MaxTokens: 200000})
	f.waitStatus(t, first, domain.StatusContextExhausted)
	f.raw(t, first, protocol.EventHandoffDocument, protocol.HandoffDocument{Summary: "Cached the module downloads.",
		RemainingWork: "Parallelise the test shards.", KeyDecisions: "Stay on make.", TokensUsed: 200000})

	c, next := f.waitContinued(t, first)
	assert.Equal(t, command.ChainIDFor(first), c.ID())
	assert.Equal(t, "Speed up the build", c.OriginalObjective())
	docs := c.HandoffDocuments()
	require.Len(t, docs, 1)
	assert.Equal(t, domain.HandoffDocument{ID: docs[0].ID, FromSessionID: first, ToSessionID: next.ID(),
		Summary: "Cached the module downloads.", RemainingWork: "Parallelise the test shards.", KeyDecisions: "Stay on make.",
		CreatedAt: docs[0].CreatedAt}, docs[0])

	assert.Equal(t, c.ID(), *next.ChainID())
	assert.Equal(t, "/work/repo", next.WorkingDirectory())
	assert.Equal(t, domain.Dollars(10), next.Budget().HardCapUsd)
	assert.Contains(t, next.Objective(), "Parallelise the test shards.")
	assert.Contains(t, next.Objective(), "Stay on make.")
	assert.Equal(t, "Speed up the build (part 2)", next.Name())
	f.waitStatus(t, next.ID(), domain.StatusRunning)
	assert.Equal(t, domain.StatusContextExhausted, f.status(t, first), "the first session stays as the record")
	assert.Equal(t, 2, f.chainSessions(t, c.ID()))

	// A redelivered handoff changes nothing.
	f.republish(t, bus.EventSubject(domain.AggregateChain, c.ID().String(), "session_handoff_initiated"))
	f.republish(t, bus.EventSubject(domain.AggregateSession, first.String(), "context_exhausted"))
	time.Sleep(500 * time.Millisecond)
	again, err := postgres.Chains{}.Get(context.Background(), f.pool, c.ID())
	require.NoError(t, err)
	assert.Len(t, again.Sessions(), 2)
	assert.Len(t, again.HandoffDocuments(), 1)
	assert.Equal(t, 2, f.chainSessions(t, c.ID()))
}

func TestVoluntaryHandoffFollowsTheSamePath(t *testing.T) {
	f := startFlow(t, 0)
	first := f.start(t)
	f.waitStatus(t, first, domain.StatusRunning)
	f.raw(t, first, protocol.EventVoluntaryHandoff, protocol.VoluntaryHandoff{Reason: "The context is full of stale logs.",
		Summary: "Profiled the build.", RemainingWork: "Drop the unused generators.", KeyDecisions: "Keep Go 1.26."})

	c, next := f.waitContinued(t, first)
	assert.Equal(t, domain.StatusContextExhausted, f.status(t, first))
	docs := c.HandoffDocuments()
	require.Len(t, docs, 1)
	assert.Equal(t, "Profiled the build.", docs[0].Summary)
	assert.Equal(t, "Keep Go 1.26.", docs[0].KeyDecisions)
	assert.Equal(t, next.ID(), docs[0].ToSessionID)
	assert.Contains(t, next.Objective(), "Drop the unused generators.")
	f.waitStatus(t, next.ID(), domain.StatusRunning)

	// Cancelling the chain stops its live session.
	f.do(t, domain.AggregateChain, command.CancelChain, c.ID(), nil)
	f.ack(t, next.ID(), protocol.CommandStop, protocol.EventStopAck)
	f.waitStatus(t, next.ID(), domain.StatusCancelled)
	assert.Equal(t, domain.StatusContextExhausted, f.status(t, first))
}

// republish puts the last event on subject on the stream again, under a
// new message id, as a redelivery would hand it to the reactions.
func (f *flow) republish(t *testing.T, subject string) {
	t.Helper()
	var m *jetstream.RawStreamMsg
	require.Eventually(t, func() bool {
		stream, err := f.js.Stream(context.Background(), bus.StreamEvents)
		if err != nil {
			return false
		}
		m, err = stream.GetLastMsgForSubject(context.Background(), subject)
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "no event on %s", subject)
	msg := &nats.Msg{Subject: subject, Data: m.Data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, uuid.NewString())
	_, err := f.js.PublishMsg(context.Background(), msg)
	require.NoError(t, err)
}

// exhaust has the session run out of context and hand its work off.
func (f *flow) exhaust(t *testing.T, id uuid.UUID, summary string) {
	t.Helper()
	f.raw(t, id, protocol.EventContextExhausted, protocol.ContextExhausted{Percent: 100, UsedTokens: 200000, MaxTokens: 200000})
	f.waitStatus(t, id, domain.StatusContextExhausted)
	f.raw(t, id, protocol.EventHandoffDocument, protocol.HandoffDocument{Summary: summary, RemainingWork: "The rest.", TokensUsed: 200000})
}

func TestAFullChainFailsTheHandoffInsteadOfGrowing(t *testing.T) {
	f := startFlowWithChainLimit(t, 0, 2)
	first := f.start(t)
	f.waitStatus(t, first, domain.StatusRunning)
	f.exhaust(t, first, "Part one done.")
	c, second := f.waitContinued(t, first)
	f.waitStatus(t, second.ID(), domain.StatusRunning)

	f.exhaust(t, second.ID(), "Part two done.")
	f.waitStatus(t, second.ID(), domain.StatusFailed)
	failure := f.session(t, second.ID()).Failure()
	require.NotNil(t, failure)
	assert.Equal(t, domain.FailureBudgetExhausted, failure.Reason)
	assert.Contains(t, failure.Message, "already holds 2 sessions")

	again, err := postgres.Chains{}.Get(context.Background(), f.pool, c.ID())
	require.NoError(t, err)
	assert.Len(t, again.Sessions(), 2, "the chain stops growing")
	assert.Equal(t, 2, f.chainSessions(t, c.ID()))
	assert.Equal(t, domain.StatusContextExhausted, f.status(t, first))
}
