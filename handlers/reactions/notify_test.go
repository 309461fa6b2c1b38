package reactions_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	"github.com/agentbus/agentbus/bus/bustest"
	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/handlers/reactions"
	"github.com/agentbus/agentbus/internal/testenv"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// also runs more workers next to the flow until the test ends.
func (f *flow) also(t *testing.T, runs ...func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, run := range runs {
		wg.Add(1)
		go func() { defer wg.Done(); _ = run(ctx) }()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// spend reports a model call of the session that cost usd, as the
// sidecar does.
func (f *flow) spend(t *testing.T, id uuid.UUID, usd float64) {
	t.Helper()
	f.raw(t, id, "usage_update", map[string]any{"model": "claude-sonnet-4-5", "cost_usd": usd, "input_tokens": 1000,
		"output_tokens": 100, "context_window_used_tokens": 20000, "context_window_max_tokens": 200000})
}

// notificationCount counts the notifications of one kind stored for owner.
func notificationCount(t *testing.T, js jetstream.JetStream, owner uuid.UUID, kind string) int {
	t.Helper()
	subject := bus.EventSubject(reactions.AggregateNotification, owner.String(), kind)
	stream, err := js.Stream(context.Background(), bus.StreamEvents)
	require.NoError(t, err)
	info, err := stream.Info(context.Background(), jetstream.WithSubjectFilter(subject))
	require.NoError(t, err)
	return int(info.State.Subjects[subject])
}

// waitNotification waits for the first notification of one kind for
// owner and returns its envelope and data.
func waitNotification(t *testing.T, js jetstream.JetStream, owner uuid.UUID, kind string) (bus.Envelope, reactions.Notification) {
	t.Helper()
	require.Eventually(t, func() bool { return notificationCount(t, js, owner, kind) > 0 },
		30*time.Second, 50*time.Millisecond, "%s was never told %s", owner, kind)
	return lastEvent[reactions.Notification](t, js, bus.EventSubject(reactions.AggregateNotification, owner.String(), kind))
}

// lastEvent returns the last event stored on subject.
func lastEvent[T any](t *testing.T, js jetstream.JetStream, subject string) (bus.Envelope, T) {
	t.Helper()
	stream, err := js.Stream(context.Background(), bus.StreamEvents)
	require.NoError(t, err)
	m, err := stream.GetLastMsgForSubject(context.Background(), subject)
	require.NoError(t, err)
	env, err := bus.DecodeEnvelope(m.Data)
	require.NoError(t, err)
	var data T
	require.NoError(t, json.Unmarshal(env.Data, &data))
	return env, data
}

// assertFrom checks that note tells owner about the last event of type
// typ of the session or chain id.
func assertFrom(t *testing.T, js jetstream.JetStream, note reactions.Notification, aggregate string, id uuid.UUID, typ string, owner uuid.UUID) {
	t.Helper()
	source, _ := lastEvent[json.RawMessage](t, js, bus.EventSubject(aggregate, id.String(), typ))
	assert.Equal(t, source.ID, note.SourceEventID, "the notification names its source event")
	assert.Equal(t, owner.String(), note.OwnerID)
	assert.WithinDuration(t, source.OccurredAt, note.OccurredAt, time.Millisecond)
	assert.NotEmpty(t, note.Title)
	assert.NotEmpty(t, note.Message)
}

func TestTheOwnerIsNotifiedOfWhatSeed001Notifies(t *testing.T) {
	f := startFlow(t, 0)
	f.also(t, reactions.Notify{JS: f.js, DB: f.pool}.Run)

	spender := f.start(t)
	f.waitStatus(t, spender, domain.StatusRunning)
	f.spend(t, spender, 8.5)
	env, note := waitNotification(t, f.js, f.owner, reactions.NotifyBudgetWarning)
	assertFrom(t, f.js, note, domain.AggregateSession, spender, "session_budget_warning", f.owner)
	assert.Equal(t, bus.EventSubject("notification", f.owner.String(), "budget_warning"), bus.EventSubject(env.Aggregate, env.AggregateID, env.Type))
	assert.Equal(t, reactions.NotifyBudgetWarning, note.Kind)
	assert.Equal(t, spender.String(), note.SessionID)
	assert.Contains(t, note.Message, "$8.5 of its $10 budget")

	f.spend(t, spender, 2)
	_, note = waitNotification(t, f.js, f.owner, reactions.NotifyBudgetExhausted)
	assertFrom(t, f.js, note, domain.AggregateSession, spender, "session_budget_exhausted", f.owner)
	assert.Contains(t, note.Message, "$10.5")

	failing := f.start(t)
	f.waitStatus(t, failing, domain.StatusRunning)
	f.raw(t, failing, "session_end", map[string]any{"status": "error", "reason": "crashed", "exit_code": 2, "error": "the engine crashed"})
	_, note = waitNotification(t, f.js, f.owner, reactions.NotifySessionFailed)
	assertFrom(t, f.js, note, domain.AggregateSession, failing, "agent_session_failed", f.owner)
	assert.Equal(t, failing.String(), note.SessionID)
	assert.Contains(t, note.Message, "the engine crashed")

	done := f.start(t)
	f.waitStatus(t, done, domain.StatusRunning)
	f.raw(t, done, "session_end", map[string]any{"status": "success", "reason": "completed", "exit_code": 0})
	f.waitStatus(t, done, domain.StatusIdle)
	assert.Zero(t, notificationCount(t, f.js, f.owner, reactions.NotifySessionCompleted), "output waiting for review is not completion")
	chain := uuid.New()
	f.do(t, domain.AggregateChain, command.CreateChain, chain, command.CreateChainData{FirstSessionID: done, OriginalObjective: "Speed up the build"})
	f.do(t, domain.AggregateChain, command.CompleteChain, chain, nil)
	_, note = waitNotification(t, f.js, f.owner, reactions.NotifyChainCompleted)
	assertFrom(t, f.js, note, domain.AggregateChain, chain, "session_chain_completed", f.owner)
	assert.Equal(t, chain.String(), note.ChainID)
	assert.Empty(t, note.SessionID)
	assert.Contains(t, note.Message, "after 1 sessions")
	f.do(t, domain.AggregateSession, command.ApproveOutput, done, nil)
	_, note = waitNotification(t, f.js, f.owner, reactions.NotifySessionCompleted)
	assertFrom(t, f.js, note, domain.AggregateSession, done, "agent_session_approved", f.owner)
	assert.Equal(t, done.String(), note.SessionID)

	full := f.start(t)
	f.waitStatus(t, full, domain.StatusRunning)
	f.raw(t, full, protocol.EventContextExhausted, protocol.ContextExhausted{Percent: 100, UsedTokens: 200000, MaxTokens: 200000})
	_, note = waitNotification(t, f.js, f.owner, reactions.NotifyContextExhausted)
	assertFrom(t, f.js, note, domain.AggregateSession, full, "context_exhausted", f.owner)

	for _, kind := range []string{reactions.NotifyBudgetWarning, reactions.NotifyBudgetExhausted, reactions.NotifySessionFailed,
		reactions.NotifyChainCompleted, reactions.NotifySessionCompleted, reactions.NotifyContextExhausted} {
		assert.Equal(t, 1, notificationCount(t, f.js, f.owner, kind), kind)
	}
}

// publishEvent stores a domain event as the outbox publisher does, under
// its own Nats-Msg-Id.
func publishEvent(t *testing.T, js jetstream.JetStream, env bus.Envelope, msgID string) {
	t.Helper()
	msg, err := bus.NewMsg(context.Background(), bus.EventSubject(env.Aggregate, env.AggregateID, env.Type), env)
	require.NoError(t, err)
	msg.Header.Set(nats.MsgIdHdr, msgID)
	_, err = js.PublishMsg(context.Background(), msg)
	require.NoError(t, err)
}

// sessionEvent is a session event as the outbox publishes it.
func sessionEvent(t *testing.T, session uuid.UUID, owner string, e domain.Event) bus.Envelope {
	t.Helper()
	data, err := json.Marshal(e)
	require.NoError(t, err)
	return bus.Envelope{ID: uuid.NewString(), Type: e.EventType(), Aggregate: domain.AggregateSession,
		AggregateID: session.String(), Version: 3, OwnerID: owner, OccurredAt: time.Now().UTC(), Data: data}
}

// settled waits until a consumer has handled everything it was given.
func settled(t *testing.T, js jetstream.JetStream, consumer string) {
	t.Helper()
	require.Eventually(t, bustest.CaughtUp(js, bus.StreamEvents, consumer),
		30*time.Second, 50*time.Millisecond, "%s never caught up", consumer)
}

func TestARedeliveredEventMakesNoSecondNotification(t *testing.T) {
	pool := testenv.Postgres(t)
	_, js, _ := bustest.Server(t)
	notify := reactions.Notify{JS: js, DB: pool}
	owner := uuid.New()
	source := sessionEvent(t, uuid.New(), owner.String(),
		domain.AgentSessionFailedEvent{FailureReason: domain.FailureAgentError, Message: "exit code 1"})
	publishEvent(t, js, source, source.ID)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = notify.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	_, note := waitNotification(t, js, owner, reactions.NotifySessionFailed)
	assert.Equal(t, source.ID, note.SourceEventID)

	// The outbox publishes an event again when it cannot tell it was
	// stored (a crash between the publish and marking it sent): the
	// consumer receives it a second time.
	publishEvent(t, js, source, source.ID+"/again")
	settled(t, js, reactions.NotifyConsumer)

	// A delivery whose ack was lost is handled again.
	cons, err := js.OrderedConsumer(context.Background(), bus.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{bus.EventSubject(source.Aggregate, source.AggregateID, source.Type)}})
	require.NoError(t, err)
	m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
	require.NoError(t, err)
	require.NoError(t, notify.Handle(context.Background(), m))
	require.NoError(t, notify.Handle(context.Background(), m))

	assert.Equal(t, 1, notificationCount(t, js, owner, reactions.NotifySessionFailed), "one failure, one notification")
}

func TestTheOwnerIsLookedUpWhenTheEventLacksIt(t *testing.T) {
	f := startFlow(t, 0)
	f.also(t, reactions.Notify{JS: f.js, DB: f.pool}.Run)
	id := f.start(t)

	exhausted := domain.SessionBudgetExhaustedEvent{SpentUsd: domain.Dollars(12), CapUsd: domain.Dollars(10)}
	source := sessionEvent(t, id, "", exhausted)
	publishEvent(t, f.js, source, source.ID)
	env, note := waitNotification(t, f.js, f.owner, reactions.NotifyBudgetExhausted)
	assert.Equal(t, f.owner.String(), env.OwnerID)
	assert.Equal(t, f.owner.String(), note.OwnerID)
	assert.Equal(t, source.ID, note.SourceEventID)
	assert.Equal(t, id.String(), note.SessionID)
	assert.Contains(t, note.Message, "$12")

	// An event of a session that does not exist, naming nobody, can
	// notify nobody: it is dead-lettered rather than retried for ever.
	orphan := sessionEvent(t, uuid.New(), "", exhausted)
	publishEvent(t, f.js, orphan, orphan.ID)
	dlq, err := f.js.Stream(context.Background(), bus.StreamDLQ)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := dlq.Info(context.Background(), jetstream.WithSubjectFilter(bus.DLQSubject(reactions.NotifyConsumer)))
		return err == nil && info.State.Msgs == 1
	}, 30*time.Second, 50*time.Millisecond, "the orphan event is dead-lettered")
}
