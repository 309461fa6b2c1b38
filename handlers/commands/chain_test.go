package commands_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
)

func (h sessionHarness) chainOf(t *testing.T, session uuid.UUID) *uuid.UUID {
	t.Helper()
	s, err := postgres.Sessions{}.Get(context.Background(), h.pool, session)
	require.NoError(t, err)
	return s.ChainID()
}

// exhausted starts a running session and exhausts its context.
func (h sessionHarness) exhausted(t *testing.T) uuid.UUID {
	t.Helper()
	id := h.newSession(t, true)
	assert.Equal(t, domain.StatusContextExhausted, h.internal(t, command.RecordContextExhausted, id, nil).Status)
	return id
}

func handoffData() command.InitiateHandoffData {
	return command.InitiateHandoffData{Summary: "Parser done, tests green.", RemainingWork: "Write the printer.", KeyDecisions: "Keep the AST immutable."}
}

func spend(cost domain.USD) command.MetricsData {
	return command.MetricsData{ModelID: "claude-sonnet-4-5", CostUsd: cost, Tokens: domain.TokenUsage{InputTokens: 1000, OutputTokens: 100},
		ContextWindow: domain.ContextWindowSnapshot{InputTokens: 1000, ModelContextLimit: 200000, RecordedAt: time.Now()}}
}

func TestCreateChainAssignsTheFirstSession(t *testing.T) {
	h := startWorker(t, 0)
	first := h.newSession(t, true)
	chain := uuid.New()
	c := ok[command.ChainState](t, h, domain.AggregateChain, command.CreateChain, chain, command.CreateChainData{FirstSessionID: first})
	assert.Equal(t, domain.ChainActive, c.Status)
	assert.EqualValues(t, 1, c.Version, "the state is the stored one")
	assert.Equal(t, "Fix the flaky test", c.OriginalObjective, "the objective defaults to the session's")
	require.Len(t, c.Sessions, 1)
	assert.Equal(t, domain.ChainedSession{SessionID: first, Position: 1, JoinedAt: c.Sessions[0].JoinedAt}, c.Sessions[0])
	assert.Equal(t, &chain, h.chainOf(t, first))
	assert.Equal(t, []string{"session_chain_created"}, h.outboxTypes(t, chain))
	assert.Contains(t, h.outboxTypes(t, first), "session_chain_assigned")

	again := ok[command.ChainState](t, h, domain.AggregateChain, command.CreateChain, chain, command.CreateChainData{FirstSessionID: first})
	assert.Equal(t, c.ID, again.ID, "creating the session's chain again returns it")
	assert.EqualValues(t, 1, again.Version)
	assert.Equal(t, []string{"session_chain_created"}, h.outboxTypes(t, chain))

	cc := func(name string, id uuid.UUID, owner string, data command.CreateChainData, kind, field, status string) refusalCase {
		return refusalCase{name: name, aggregate: domain.AggregateChain, command: command.CreateChain, id: id, owner: owner,
			data: data, kind: kind, field: field, status: status}
	}
	other := h.newSession(t, false)
	h.checkRefusals(t, []refusalCase{
		cc("session in another chain", uuid.New(), "", command.CreateChainData{FirstSessionID: first}, command.KindConflict, "", "Running"),
		cc("no first session", uuid.New(), "", command.CreateChainData{}, command.KindValidation, "firstSessionId", ""),
		cc("objective too long", uuid.New(), "", command.CreateChainData{FirstSessionID: other, OriginalObjective: strings.Repeat("x", 2001)},
			command.KindValidation, "originalObjective", ""),
		cc("unknown session", uuid.New(), "", command.CreateChainData{FirstSessionID: uuid.New()}, command.KindNotFound, "", ""),
		cc("another owner's session", uuid.New(), uuid.NewString(), command.CreateChainData{FirstSessionID: other}, command.KindNotFound, "", ""),
	})
	assert.Nil(t, h.chainOf(t, other), "refusals change nothing")
}

func TestHandoffCreatesTheChainLazilyAndAttachesTheContinuation(t *testing.T) {
	h := startWorker(t, 0)
	first := h.exhausted(t)
	c := okAs[command.ChainState](t, h, "", domain.AggregateChain, command.InitiateHandoff, first, handoffData())
	assert.Equal(t, command.ChainIDFor(first), c.ID, "the lazily created chain has the first session's chain id")
	assert.Equal(t, &c.ID, h.chainOf(t, first))
	require.Len(t, c.HandoffDocuments, 1)
	doc := c.HandoffDocuments[0]
	assert.Equal(t, first, doc.FromSessionID)
	assert.True(t, doc.IsPending())
	assert.Equal(t, "Keep the AST immutable.", doc.KeyDecisions)
	assert.Equal(t, []string{"session_chain_created", "session_handoff_initiated"}, h.outboxTypes(t, c.ID))

	// The handoff reaction's CreateChain, arriving late, finds the chain.
	again := okAs[command.ChainState](t, h, "", domain.AggregateChain, command.CreateChain, command.ChainIDFor(first),
		command.CreateChainData{FirstSessionID: first})
	assert.Len(t, again.HandoffDocuments, 1)

	next := uuid.New()
	start := startData()
	start.ChainID = &c.ID
	ok[command.StartSessionResult](t, h, domain.AggregateSession, command.StartSession, next, start)
	c = okAs[command.ChainState](t, h, "", domain.AggregateChain, command.AttachSession, c.ID, command.AttachSessionData{SessionID: next})
	require.Len(t, c.Sessions, 2)
	assert.EqualValues(t, 2, c.Version)
	assert.Equal(t, next, c.Sessions[1].SessionID)
	assert.Equal(t, 2, c.Sessions[1].Position)
	assert.Equal(t, next, c.HandoffDocuments[0].ToSessionID)
	assert.Contains(t, h.outboxTypes(t, c.ID), "session_added_to_chain")

	running := h.newSession(t, true)
	emptySummary := handoffData()
	emptySummary.Summary = " "
	noWork := handoffData()
	noWork.RemainingWork = strings.Repeat("x", domain.MaxHandoffChars+1)
	unrelated := h.newSession(t, false)
	theirs := uuid.New()
	okAs[command.StartSessionResult](t, h, uuid.NewString(), domain.AggregateSession, command.StartSession, theirs, startData())
	ih := func(name string, session uuid.UUID, data command.InitiateHandoffData, kind, field, status string) refusalCase {
		return refusalCase{name: name, aggregate: domain.AggregateChain, command: command.InitiateHandoff, id: session,
			data: data, kind: kind, field: field, status: status}
	}
	at := func(name string, session uuid.UUID, kind, status string) refusalCase {
		return refusalCase{name: name, aggregate: domain.AggregateChain, command: command.AttachSession, id: c.ID,
			data: command.AttachSessionData{SessionID: session}, kind: kind, status: status}
	}
	h.checkRefusals(t, []refusalCase{
		ih("session still running", running, handoffData(), command.KindConflict, "", "Running"),
		ih("no longer the current session", first, handoffData(), command.KindConflict, "", "Active"),
		ih("empty summary", h.exhausted(t), emptySummary, command.KindValidation, "summary", ""),
		ih("remaining work too long", h.exhausted(t), noWork, command.KindValidation, "remainingWork", ""),
		ih("unknown session", uuid.New(), handoffData(), command.KindNotFound, "", ""),
		at("attached twice", next, command.KindConflict, "Active"),
		at("unknown session", uuid.New(), command.KindNotFound, ""),
		at("another owner's session", theirs, command.KindNotFound, ""),
		{name: "another owner's chain", aggregate: domain.AggregateChain, command: command.AttachSession, id: c.ID, owner: uuid.NewString(),
			data: command.AttachSessionData{SessionID: unrelated}, kind: command.KindNotFound},
	})

	// A second handoff waits while the first has no continuation.
	h.internal(t, command.AllocateSession, next, nil)
	h.internal(t, command.RecordContextExhausted, next, nil)
	okAs[command.ChainState](t, h, "", domain.AggregateChain, command.InitiateHandoff, next, handoffData())
	h.checkRefusals(t, []refusalCase{ih("a handoff is pending", next, handoffData(), command.KindConflict, "", "Active")})
}

func TestCompleteAndCancelChain(t *testing.T) {
	h := startWorker(t, 0)
	first := h.newSession(t, true)
	h.internal(t, command.UpdateMetrics, first, spend(domain.Dollars(1)/2))
	h.internal(t, command.RecordContextExhausted, first, nil)
	chain := okAs[command.ChainState](t, h, "", domain.AggregateChain, command.InitiateHandoff, first, handoffData()).ID
	next := uuid.New()
	start := startData()
	start.ChainID = &chain
	ok[command.StartSessionResult](t, h, domain.AggregateSession, command.StartSession, next, start)
	okAs[command.ChainState](t, h, "", domain.AggregateChain, command.AttachSession, chain, command.AttachSessionData{SessionID: next})

	h.checkRefusals(t, []refusalCase{
		{name: "current session not done", aggregate: domain.AggregateChain, command: command.CompleteChain, id: chain,
			kind: command.KindConflict, status: "Queued"},
		{name: "another owner's chain", aggregate: domain.AggregateChain, command: command.CompleteChain, id: chain,
			owner: uuid.NewString(), kind: command.KindNotFound},
		{name: "unknown chain", aggregate: domain.AggregateChain, command: command.CancelChain, id: uuid.New(), kind: command.KindNotFound},
	})
	h.internal(t, command.AllocateSession, next, nil)
	h.internal(t, command.UpdateMetrics, next, spend(domain.Dollars(2)))
	h.internal(t, command.RecordTurnCompleted, next, nil)
	c := ok[command.ChainState](t, h, domain.AggregateChain, command.CompleteChain, chain, nil)
	assert.Equal(t, domain.ChainCompleted, c.Status)
	assert.NotNil(t, c.CompletedAt)
	var completed domain.SessionChainCompletedEvent
	h.outboxData(t, chain, "session_chain_completed", &completed)
	assert.Equal(t, 2, completed.TotalSessions)
	assert.Equal(t, domain.Dollars(5)/2, completed.TotalCostUsd, "the cost of every session of the chain")

	h.checkRefusals(t, []refusalCase{
		{name: "complete twice", aggregate: domain.AggregateChain, command: command.CompleteChain, id: chain, kind: command.KindConflict, status: "Completed"},
		{name: "cancel a completed chain", aggregate: domain.AggregateChain, command: command.CancelChain, id: chain, kind: command.KindConflict, status: "Completed"},
	})

	other := uuid.New()
	ok[command.ChainState](t, h, domain.AggregateChain, command.CreateChain, other, command.CreateChainData{FirstSessionID: h.newSession(t, false)})
	assert.Equal(t, domain.ChainCancelled, ok[command.ChainState](t, h, domain.AggregateChain, command.CancelChain, other, nil).Status)
	assert.Contains(t, h.outboxTypes(t, other), "session_chain_cancelled")
	h.checkRefusals(t, []refusalCase{
		{name: "cancel twice", aggregate: domain.AggregateChain, command: command.CancelChain, id: other, kind: command.KindConflict, status: "Cancelled"},
	})
}
