package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/bus"
	agentcmd "github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/handlers/acl"
	cmdhandlers "github.com/agentbus/agentbus/handlers/commands"
	"github.com/agentbus/agentbus/handlers/reactions"
	"github.com/agentbus/agentbus/postgres"
	"github.com/agentbus/agentbus/relay"
	"github.com/agentbus/agentbus/sidecar/protocol"
)

// TestE2E runs the session flows of seed 001 §8.10 through the whole
// system: the test writes raw events to each session's Redis stream and
// reads its command stream, as an external sidecar does, and drives the
// sessions with commands as the API does.
func TestE2E(t *testing.T) {
	s := startSystem(t)

	t.Run("FullSessionToApproval", func(t *testing.T) {
		owner := s.owner()
		id, sc := s.runningSession(t, owner, agentcmd.StartSessionData{Objective: "Add input validation"})
		cfg := sc.waitStarted(t)
		assert.Equal(t, id.String(), cfg.SessionID)
		assert.Equal(t, "Add input validation", cfg.Objective)
		assert.Equal(t, "/work/repo", cfg.WorkingDirectory)

		sc.text(t, "m1", "I'll start by reading the handler.")
		sc.usage(t, 0.02, 12000)
		sc.turnCompleted(t, true)
		sc.end(t, "completed")
		require.Eventually(t, func() bool {
			got := s.session(t, id)
			return got.Status() == domain.StatusIdle && got.HasPendingReview()
		}, wait, 20*time.Millisecond, "the session never went to review")
		assert.Equal(t, usd(t, "0.02"), s.session(t, id).Metrics().TotalCostUsd)

		s.do(t, owner, domain.AggregateSession, agentcmd.ApproveOutput, id, nil)
		done := s.waitStatus(t, id, domain.StatusCompleted)
		assert.False(t, done.HasPendingReview())
		s.waitEvent(t, domain.AggregateSession, id, "session_released")
		evs := s.events(t, domain.AggregateSession, id)
		assertInOrder(t, evs, "agent_session_created", "session_allocated", "agent_session_started",
			"agent_session_output_ready", "agent_session_approved", "session_released")
		assert.Contains(t, s.activity(t, id), [2]string{protocol.EventAssistantMessage, string(domain.ActivityMessage)})
		assert.Empty(t, sc.commands(t), "a session that runs by itself gets no command")
	})

	t.Run("PauseAndResume", func(t *testing.T) {
		owner := s.owner()
		id, sc := s.runningSession(t, owner, agentcmd.StartSessionData{})
		sc.waitStarted(t)

		s.do(t, owner, domain.AggregateSession, agentcmd.PauseSession, id, nil)
		pause := sc.waitCommand(t, protocol.CommandPause, 1)
		assert.Equal(t, domain.StatusPausing, s.session(t, id).Status())
		sc.ack(t, pause[0], protocol.EventPauseAck)
		s.waitStatus(t, id, domain.StatusPaused)

		s.do(t, owner, domain.AggregateSession, agentcmd.ResumeSession, id, nil)
		resume := sc.waitCommand(t, protocol.CommandResume, 1)
		sc.ack(t, resume[0], protocol.EventResumeAck)
		s.waitStatus(t, id, domain.StatusRunning)
		assert.Equal(t, []string{protocol.CommandPause, protocol.CommandResume}, types(sc.commands(t)))
		s.waitEvent(t, domain.AggregateSession, id, "session_resumed") // the outbox publishes after the commit
		assertInOrder(t, s.events(t, domain.AggregateSession, id),
			"session_pause_requested", "session_paused", "session_resume_requested", "session_resumed")
	})

	t.Run("InterruptThenFollowUp", func(t *testing.T) {
		owner := s.owner()
		id, sc := s.runningSession(t, owner, agentcmd.StartSessionData{})
		sc.waitStarted(t)

		s.do(t, owner, domain.AggregateSession, agentcmd.InterruptSession, id, nil)
		interrupt := sc.waitCommand(t, protocol.CommandInterrupt, 1)
		sc.ack(t, interrupt[0], protocol.EventInterruptAck)
		s.waitStatus(t, id, domain.StatusInterrupted)

		msg := uuid.New()
		s.do(t, owner, domain.AggregateQueue, agentcmd.EnqueueMessage, id, agentcmd.EnqueueData{MessageID: msg,
			Content: "Only touch the handler package.", Priority: domain.PriorityQueued})
		got := steering(t, sc.waitCommand(t, protocol.CommandSteeringMessage, 1))
		assert.Equal(t, protocol.SteeringMessage{MessageID: msg.String(), Content: "Only touch the handler package.",
			Priority: string(domain.PriorityQueued)}, got[0])
		sc.send(t, protocol.EventMessageDelivered, map[string]any{"message_id": msg.String(), "priority": "Queued"})
		s.waitStatus(t, id, domain.StatusRunning)
		s.waitEvent(t, domain.AggregateQueue, id, "message_delivered")
	})

	t.Run("SkillsReachTheSidecarAndAReloadAddsOne", func(t *testing.T) {
		owner := s.owner()
		skill := func(name, instructions string) uuid.UUID {
			id := uuid.New()
			s.do(t, owner, domain.AggregateSkill, agentcmd.CreateSkill, id, agentcmd.CreateSkillData{
				Name: name, Description: name, Instructions: instructions})
			return id
		}
		tests, haiku := skill("Tests first", "Write the test first."), skill("Haiku", "Answer in haiku.")
		id, sc := s.runningSession(t, owner, agentcmd.StartSessionData{SkillIDs: []uuid.UUID{tests}})
		cfg := sc.waitStarted(t)
		assert.Equal(t, "Write the test first.", cfg.SystemPrompt, "the runtime starts the sidecar with the composed config")

		sc.turnCompleted(t, false)
		s.waitStatus(t, id, domain.StatusIdle)
		s.do(t, owner, domain.AggregateSession, agentcmd.EnableSkill, id, agentcmd.SkillData{SkillID: haiku})
		reload := sc.waitCommand(t, protocol.CommandReloadConfig, 1)
		var data protocol.ReloadConfig
		require.NoError(t, json.Unmarshal(reload[0].Data, &data))
		require.NotNil(t, data.Config)
		assert.Equal(t, "Write the test first.\n\nAnswer in haiku.", data.Config.SystemPrompt)

		// An ack of a command never sent changes nothing; the awaited one confirms.
		sc.send(t, protocol.EventReloadConfigAck, map[string]any{"command_id": uuid.NewString()})
		sc.ack(t, reload[0], protocol.EventReloadConfigAck)
		s.waitEvent(t, domain.AggregateSession, id, "session_reloaded")
		assert.False(t, s.session(t, id).ReloadPending())
		assert.Equal(t, 1, count(s.events(t, domain.AggregateSession, id), "session_reloaded"))
		assert.Contains(t, s.activity(t, id), [2]string{protocol.EventReloadConfigAck, string(domain.ActivityUnknownEvent)},
			"the stray ack is recorded as unexpected")
	})

	t.Run("CancelWhileRunning", func(t *testing.T) {
		owner := s.owner()
		id, sc := s.runningSession(t, owner, agentcmd.StartSessionData{})
		sc.waitStarted(t)

		s.do(t, owner, domain.AggregateSession, agentcmd.CancelSession, id, nil)
		stop := sc.waitCommand(t, protocol.CommandStop, 1)
		assert.Equal(t, domain.StatusCancelling, s.session(t, id).Status())
		sc.send(t, protocol.EventStopAck, map[string]any{"command_id": stop[0].CommandID, "forced": false})
		sc.end(t, "stopped")
		s.waitStatus(t, id, domain.StatusCancelled)
		s.waitEvent(t, domain.AggregateSession, id, "session_released")
	})

	t.Run("PoolFull", func(t *testing.T) {
		owner := s.owner()
		full := make([]uuid.UUID, domain.DefaultMaxConcurrentSessions)
		for i := range full {
			full[i] = s.startSession(t, owner, agentcmd.StartSessionData{})
		}
		for _, id := range full {
			s.waitStatus(t, id, domain.StatusRunning)
		}
		next := s.startSession(t, owner, agentcmd.StartSessionData{Objective: "Waits for a slot"})
		s.waitEvent(t, domain.AggregateSession, next, "session_pool_exhausted")
		cancelled := s.startSession(t, owner, agentcmd.StartSessionData{Objective: "Cancelled while queued"})
		s.waitEvent(t, domain.AggregateSession, cancelled, "session_pool_exhausted")
		assert.Equal(t, domain.StatusQueued, s.session(t, next).Status())

		t.Run("CancelWhileQueued", func(t *testing.T) {
			s.do(t, owner, domain.AggregateSession, agentcmd.CancelSession, cancelled, nil)
			s.waitStatus(t, cancelled, domain.StatusCancelled)
			s.waitEvent(t, domain.AggregateSession, cancelled, "session_cancelled")
			assert.NotContains(t, s.events(t, domain.AggregateSession, cancelled), "session_allocated")
			assert.Empty(t, s.sidecar(cancelled).commands(t), "a Queued session has no sidecar to stop")
			assert.Equal(t, domain.StatusQueued, s.session(t, next).Status(), "a cancelled Queued session frees no slot")
		})

		t.Run("StartedWhenASlotFrees", func(t *testing.T) {
			first := s.sidecar(full[0])
			first.waitStarted(t)
			first.turnCompleted(t, true)
			first.end(t, "completed")
			require.Eventually(t, func() bool { return s.session(t, full[0]).HasPendingReview() }, wait, 20*time.Millisecond)
			s.do(t, owner, domain.AggregateSession, agentcmd.ApproveOutput, full[0], nil)
			s.waitStatus(t, full[0], domain.StatusCompleted)

			s.waitStatus(t, next, domain.StatusRunning)
			cfg := s.sidecar(next).waitStarted(t)
			assert.Equal(t, "Waits for a slot", cfg.Objective)
			assertInOrder(t, s.events(t, domain.AggregateSession, next),
				"agent_session_created", "session_pool_exhausted", "session_allocated", "agent_session_started")
		})
	})

	t.Run("QuestionAnswered", func(t *testing.T) {
		owner := s.owner()
		id, sc := s.runningSession(t, owner, agentcmd.StartSessionData{})
		sc.waitStarted(t)

		sc.toolUse(t, "toolu_q1", "AskUserQuestion", map[string]any{"questions": []any{map[string]any{
			"question": "Which database?", "options": []any{map[string]any{"label": "PostgreSQL"}, map[string]any{"label": "SQLite"}}}}})
		waiting := s.waitStatus(t, id, domain.StatusWaitingForInput)
		require.NotNil(t, waiting.PendingQuestion())
		assert.Equal(t, "Which database?", waiting.PendingQuestion().Content)

		s.do(t, owner, domain.AggregateSession, agentcmd.AnswerQuestion, id, agentcmd.AnswerData{Answer: "PostgreSQL"})
		answers := sc.waitCommand(t, protocol.CommandAnswerQuestion, 1)
		var answer protocol.AnswerQuestion
		require.NoError(t, json.Unmarshal(answers[0].Data, &answer))
		assert.Equal(t, "PostgreSQL", answer.Answer)
		s.waitStatus(t, id, domain.StatusRunning)
		sc.send(t, protocol.EventToolResult, map[string]any{"tool_use_id": "toolu_q1", "content": "PostgreSQL", "is_error": false})
		require.Eventually(t, func() bool {
			return slices.Contains(s.activity(t, id), [2]string{protocol.EventToolResult, string(domain.ActivityToolCallEnd)})
		}, wait, 20*time.Millisecond)
	})

	t.Run("PlanApprovedAndRejected", func(t *testing.T) {
		owner := s.owner()
		id, sc := s.runningSession(t, owner, agentcmd.StartSessionData{})
		sc.waitStarted(t)

		sc.toolUse(t, "toolu_p0", "EnterPlanMode", map[string]any{})
		sc.toolUse(t, "toolu_p1", "ExitPlanMode", map[string]any{"plan": "1. Validate the inputs\n2. Test them"})
		waiting := s.waitStatus(t, id, domain.StatusWaitingForApproval)
		require.NotNil(t, waiting.Plan())
		assert.Equal(t, "1. Validate the inputs\n2. Test them", waiting.Plan().Content)
		s.do(t, owner, domain.AggregateSession, agentcmd.RejectPlan, id, agentcmd.FeedbackData{Feedback: "Also log the rejected inputs."})
		decisions := sc.waitCommand(t, protocol.CommandPlanDecision, 1)
		var rejected protocol.PlanDecision
		require.NoError(t, json.Unmarshal(decisions[0].Data, &rejected))
		require.NotNil(t, rejected.Approved)
		assert.False(t, *rejected.Approved)
		assert.Equal(t, "Also log the rejected inputs.", rejected.Feedback)
		s.waitStatus(t, id, domain.StatusRunning)

		sc.send(t, protocol.EventToolResult, map[string]any{"tool_use_id": "toolu_p1", "content": "Also log the rejected inputs.", "is_error": true})
		sc.toolUse(t, "toolu_p2", "ExitPlanMode", map[string]any{"plan": "1. Validate and log the inputs\n2. Test them"})
		s.waitStatus(t, id, domain.StatusWaitingForApproval)
		s.do(t, owner, domain.AggregateSession, agentcmd.ApprovePlan, id, nil)
		decisions = sc.waitCommand(t, protocol.CommandPlanDecision, 2)
		var approved protocol.PlanDecision
		require.NoError(t, json.Unmarshal(decisions[1].Data, &approved))
		require.NotNil(t, approved.Approved)
		assert.True(t, *approved.Approved)
		s.waitStatus(t, id, domain.StatusRunning)
		assertInOrder(t, s.events(t, domain.AggregateSession, id),
			"session_plan_pending_approval", "session_plan_rejected", "session_plan_pending_approval", "session_plan_approved")
	})

	t.Run("ToolPermissionAllowedAndDenied", func(t *testing.T) {
		owner := s.owner()
		id, sc := s.runningSession(t, owner, agentcmd.StartSessionData{
			ToolApproval: &domain.ToolApprovalPolicy{Mode: domain.ApprovalAll, Timeout: time.Hour, OnTimeout: domain.TimeoutDeny}})
		cfg := sc.waitStarted(t)
		assert.Equal(t, []string{"*"}, cfg.PermissionPolicy.RequireApproval, "the sidecar asks for every tool")

		request := func(requestID, tool string, input any) {
			sc.toolUse(t, "toolu_"+requestID, tool, input)
			sc.send(t, protocol.EventPermissionRequest, map[string]any{"request_id": requestID, "tool_use_id": "toolu_" + requestID,
				"tool_name": tool, "input": input, "timeout_ms": 3600000})
			got := s.waitStatus(t, id, domain.StatusWaitingForApproval)
			require.NotNil(t, got.PendingPermission())
			assert.Equal(t, requestID, got.PendingPermission().RequestID)
		}
		response := func(n int) protocol.PermissionResponse {
			got := sc.waitCommand(t, protocol.CommandPermissionResponse, n)
			var r protocol.PermissionResponse
			require.NoError(t, json.Unmarshal(got[n-1].Data, &r))
			return r
		}

		request("r1", "Bash", map[string]any{"command": "go test ./..."})
		s.do(t, owner, domain.AggregateSession, agentcmd.AllowPermission, id, agentcmd.PermissionDecisionData{RequestID: "r1"})
		assert.Equal(t, protocol.PermissionResponse{RequestID: "r1", Behavior: protocol.BehaviorAllow}, response(1))
		s.waitStatus(t, id, domain.StatusRunning)

		request("r2", "Bash", map[string]any{"command": "rm -rf build/"})
		s.do(t, owner, domain.AggregateSession, agentcmd.DenyPermission, id, agentcmd.PermissionDecisionData{RequestID: "r2", Message: "Never delete build output."})
		assert.Equal(t, protocol.PermissionResponse{RequestID: "r2", Behavior: protocol.BehaviorDeny, Message: "Never delete build output."}, response(2))
		s.waitStatus(t, id, domain.StatusRunning)
		assertInOrder(t, s.events(t, domain.AggregateSession, id),
			"tool_permission_requested", "tool_permission_granted", "tool_permission_requested", "tool_permission_denied")
	})

	t.Run("ToolPermissionTimedOut", func(t *testing.T) {
		owner := s.owner()
		id, sc := s.runningSession(t, owner, agentcmd.StartSessionData{
			ToolApproval: &domain.ToolApprovalPolicy{Mode: domain.ApprovalAll, Timeout: time.Second, OnTimeout: domain.TimeoutDeny}})
		sc.waitStarted(t)
		sc.toolUse(t, "toolu_r3", "Bash", map[string]any{"command": "make deploy"})
		sc.send(t, protocol.EventPermissionRequest, map[string]any{"request_id": "r3", "tool_use_id": "toolu_r3",
			"tool_name": "Bash", "input": map[string]any{"command": "make deploy"}, "timeout_ms": 1000})
		s.waitStatus(t, id, domain.StatusWaitingForApproval)

		// Nobody answers: the timeouts worker expires the request and the
		// policy denies it, once.
		got := sc.waitCommand(t, protocol.CommandPermissionResponse, 1)
		var r protocol.PermissionResponse
		require.NoError(t, json.Unmarshal(got[0].Data, &r))
		assert.Equal(t, "r3", r.RequestID)
		assert.Equal(t, protocol.BehaviorDeny, r.Behavior)
		after := s.waitStatus(t, id, domain.StatusRunning)
		assert.Nil(t, after.PendingPermission())
		assertInOrder(t, s.events(t, domain.AggregateSession, id), "tool_permission_requested", "tool_permission_timed_out")
	})

	t.Run("BudgetWarningThenAutoPause", func(t *testing.T) {
		owner := s.owner()
		id, sc := s.runningSession(t, owner, agentcmd.StartSessionData{BudgetCapUsd: domain.Dollars(1)})
		sc.waitStarted(t)

		sc.usage(t, 0.5, 10000)
		sc.usage(t, 0.35, 20000)
		var warning domain.SessionBudgetWarningEvent
		require.NoError(t, json.Unmarshal(s.waitEvent(t, domain.AggregateSession, id, "session_budget_warning"), &warning))
		assert.Equal(t, usd(t, "0.85"), warning.SpentUsd)
		assert.Equal(t, domain.StatusRunning, s.session(t, id).Status(), "a warning does not stop the session")
		assert.Empty(t, sc.commandsOf(t, protocol.CommandPause))

		sc.usage(t, 0.25, 30000)
		s.waitEvent(t, domain.AggregateSession, id, "session_budget_exhausted")
		pause := sc.waitCommand(t, protocol.CommandPause, 1)
		assert.Equal(t, domain.StatusPausing, s.session(t, id).Status())
		sc.ack(t, pause[0], protocol.EventPauseAck)
		paused := s.waitStatus(t, id, domain.StatusPaused)
		assert.Equal(t, usd(t, "1.1"), paused.Metrics().TotalCostUsd)

		r, err := s.client.Do(context.Background(), mustCommand(t, owner, agentcmd.ResumeSession, id))
		require.NoError(t, err)
		e, refused := agentcmd.AsError(r.Err())
		require.True(t, refused, "a spent budget keeps the session paused")
		assert.Equal(t, agentcmd.KindConflict, e.Kind)
		assert.Equal(t, domain.StatusPaused, s.session(t, id).Status())
	})

	t.Run("ContextExhaustionContinuesInAChain", func(t *testing.T) {
		owner := s.owner()
		first := s.startSession(t, owner, agentcmd.StartSessionData{Objective: "Migrate the legacy package"})
		s.waitStatus(t, first, domain.StatusRunning)
		sc := s.sidecar(first)
		sc.waitStarted(t)

		sc.usage(t, 0.1, 176000)
		sc.send(t, protocol.EventContextNearingLimit, map[string]any{"percent": 88, "threshold_percent": 85, "used_tokens": 176000, "max_tokens": 200000})
		sc.send(t, protocol.EventContextExhausted, map[string]any{"percent": 100, "used_tokens": 200000, "max_tokens": 200000})
		sc.send(t, protocol.EventHandoffDocument, map[string]any{"summary": "Mapped part1 to part4.",
			"remaining_work": "Write the migration of each part.", "key_decisions": "Keep the public API.", "tokens_used": 200000})
		sc.end(t, "context_exhausted")

		var chain *domain.SessionChain
		require.Eventually(t, func() bool {
			var err error
			chain, err = postgres.Chains{}.GetBySession(context.Background(), s.in.Pool, first)
			return err == nil && len(chain.Sessions()) == 2
		}, wait, 20*time.Millisecond, "the work never continued in a chain")
		assert.Equal(t, domain.StatusContextExhausted, s.session(t, first).Status(), "the first session stays as the record")
		docs := chain.HandoffDocuments()
		require.Len(t, docs, 1)
		assert.Equal(t, first, docs[0].FromSessionID)
		assert.Equal(t, "Mapped part1 to part4.", docs[0].Summary)
		assert.Equal(t, "Write the migration of each part.", docs[0].RemainingWork)
		assert.Equal(t, "Keep the public API.", docs[0].KeyDecisions)

		second := chain.CurrentSessionID()
		assert.Equal(t, docs[0].ToSessionID, second)
		s.waitStatus(t, second, domain.StatusRunning)
		cfg := s.sidecar(second).waitStarted(t)
		assert.Equal(t, chain.ID().String(), cfg.ChainID)
		assert.Contains(t, cfg.Objective, "Write the migration of each part.")
		s.waitEvent(t, domain.AggregateChain, chain.ID(), "session_handoff_initiated")
		s.waitEvent(t, domain.AggregateSession, first, "session_released")
	})

	t.Run("ImmediateOvertakesQueued", func(t *testing.T) {
		owner := s.owner()
		id, sc := s.runningSession(t, owner, agentcmd.StartSessionData{})
		sc.waitStarted(t)

		queued, immediate := uuid.New(), uuid.New()
		s.do(t, owner, domain.AggregateQueue, agentcmd.EnqueueMessage, id, agentcmd.EnqueueData{MessageID: queued,
			Content: "Then update the docs.", Priority: domain.PriorityQueued})
		s.do(t, owner, domain.AggregateQueue, agentcmd.EnqueueMessage, id, agentcmd.EnqueueData{MessageID: immediate,
			Content: "Use make, not bazel.", Priority: domain.PriorityImmediate})
		got := steering(t, sc.waitCommand(t, protocol.CommandSteeringMessage, 1))
		assert.Equal(t, immediate.String(), got[0].MessageID, "Immediate goes while the turn runs")
		sc.send(t, protocol.EventMessageDelivered, map[string]any{"message_id": immediate.String(), "priority": "Immediate"})
		sc.text(t, "m2", "Understood: Use make, not bazel.")
		s.waitEvent(t, domain.AggregateQueue, id, "message_delivered")
		assert.Len(t, sc.commandsOf(t, protocol.CommandSteeringMessage), 1, "Queued waits for the turn to end")

		sc.turnCompleted(t, false)
		got = steering(t, sc.waitCommand(t, protocol.CommandSteeringMessage, 2))
		assert.Equal(t, []string{immediate.String(), queued.String()}, []string{got[0].MessageID, got[1].MessageID})
		sc.send(t, protocol.EventMessageDelivered, map[string]any{"message_id": queued.String(), "priority": "Queued"})
		require.Eventually(t, func() bool {
			q, err := postgres.Queues{}.Get(context.Background(), s.in.Pool, id, uuid.MustParse(owner))
			return err == nil && len(q.Pending()) == 0
		}, wait, 20*time.Millisecond, "both messages are delivered")
		s.waitStatus(t, id, domain.StatusRunning)
	})

	t.Run("MalformedRawEventIsDeadLettered", func(t *testing.T) {
		owner := s.owner()
		id, sc := s.runningSession(t, owner, agentcmd.StartSessionData{})
		sc.waitStarted(t)

		ts := fmt.Sprint(time.Now().UnixMilli())
		sc.sendFields(t, map[string]any{"type": "dance", "data": "{}", "ts": ts})
		sc.sendFields(t, map[string]any{"type": protocol.EventAssistantMessage, "data": "not json", "ts": ts})
		sc.turnCompleted(t, false)
		s.waitStatus(t, id, domain.StatusIdle)

		invalid := bus.SidecarEventSubject(id.String(), relay.TypeInvalid)
		var dead []*jetstream.RawStreamMsg
		require.Eventually(t, func() bool {
			dead = dlq(t, s, acl.Consumer, invalid)
			return len(dead) == 2
		}, wait, 20*time.Millisecond, "both entries are dead-lettered")
		for _, m := range dead {
			var ev relay.Event
			require.NoError(t, json.Unmarshal(m.Data, &ev))
			assert.Equal(t, id.String(), ev.SessionID)
			assert.NotEmpty(t, m.Header.Get(bus.HeaderError))
		}
		unknown := 0
		for _, item := range s.activity(t, id) {
			if item == [2]string{relay.TypeInvalid, string(domain.ActivityUnknownEvent)} {
				unknown++
			}
		}
		assert.Equal(t, 2, unknown, "each unreadable entry is an activity item")
		assert.Equal(t, domain.StatusIdle, s.session(t, id).Status(), "the session goes on")
	})
}

// dlq returns the dead letters of a consumer whose original subject is subject.
func dlq(t *testing.T, s *system, consumer, subject string) []*jetstream.RawStreamMsg {
	t.Helper()
	stream, err := s.in.JS.Stream(context.Background(), bus.StreamDLQ)
	require.NoError(t, err)
	info, err := stream.Info(context.Background())
	require.NoError(t, err)
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := stream.GetMsg(context.Background(), seq)
		if err != nil || m.Subject != bus.DLQSubject(consumer) || m.Header.Get(bus.HeaderOriginalSubject) != subject {
			continue
		}
		out = append(out, m)
	}
	return out
}

func usd(t *testing.T, s string) domain.USD {
	t.Helper()
	v, err := domain.ParseUSD(s)
	require.NoError(t, err)
	return v
}

func mustCommand(t *testing.T, owner, name string, id uuid.UUID) agentcmd.Command {
	t.Helper()
	cmd, err := agentcmd.New(domain.AggregateSession, name, id, owner, nil)
	require.NoError(t, err)
	return cmd
}

// assertInOrder checks that want occur in got in this order, others between.
func assertInOrder(t *testing.T, got []string, want ...string) {
	t.Helper()
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	assert.Equal(t, len(want), i, "want %v in this order within %v", want, got)
}

// killable is one worker the kill test stops in the middle of a flow.
type killable struct {
	name string
	// waiting reports that work for the stopped worker has piled up.
	waiting func(s *system, session uuid.UUID) bool
	// atStart stops the worker before the session starts: the start is
	// its first work.
	atStart bool
}

// TestKillAWorker stops one worker abruptly in the middle of a session's
// flow, starts it again, and checks that the flow ends as an undisturbed
// one does: the durable consumers, the relay's Redis groups and the outbox
// pick up where the stopped copy left off, and nothing is done twice.
func TestKillAWorker(t *testing.T) {
	s := startSystem(t)
	want := runKillFlow(t, s, nil)

	backlog := func(stream, consumer string) func(*system, uuid.UUID) bool {
		return func(s *system, _ uuid.UUID) bool { return s.consumerHasWork(stream, consumer) }
	}
	for _, k := range []killable{
		{name: "acl", waiting: backlog(bus.StreamSidecarEvents, acl.Consumer)},
		{name: "commands", waiting: backlog(bus.StreamCommands, cmdhandlers.Consumer)},
		// No outbox case: the commands worker publishes the events it
		// committed itself, so no work waits for a stopped outbox
		// forwarder; its safety net is tested by postgres'
		// TestOutboxCrashAfterCommitBeforePublish and the chaos suite.
		{name: "relay", waiting: backlog(bus.StreamSidecarCommands, relay.DefaultOutboundConsumer)},
		{name: "pool", waiting: backlog(bus.StreamEvents, reactions.PoolConsumer), atStart: true},
	} {
		t.Run(k.name, func(t *testing.T) {
			assert.Equal(t, want, runKillFlow(t, s, &k))
		})
	}
}

// flowResult is what a session's flow leaves behind, free of ids and times.
type flowResult struct {
	Status         domain.SessionStatus
	PendingReview  bool
	Cost           domain.USD
	Events         []string
	Activity       [][2]string
	Commands       []string
	CommandsUnique bool
}

// runKillFlow runs one session from start to approval, with a pause and a
// resume on the way. With k set, k's worker is stopped before the start
// or before the first output, and started again once work waits for it.
func runKillFlow(t *testing.T, s *system, k *killable) flowResult {
	t.Helper()
	kill := func(atStart bool) {
		if k == nil || k.atStart != atStart {
			return
		}
		// A stopped copy unpins itself, so the new one is not kept
		// waiting for priority_timeout.
		s.stopWorker(t, k.name)
	}
	restart := func(atStart bool, id uuid.UUID) {
		if k == nil || k.atStart != atStart {
			return
		}
		require.Eventually(t, func() bool { return k.waiting(s, id) },
			wait, 20*time.Millisecond, "no work waits for the stopped %s worker", k.name)
		s.startWorker(t, k.name)
	}

	owner := s.owner()
	kill(true)
	id := s.startSession(t, owner, agentcmd.StartSessionData{})
	restart(true, id)
	s.waitStatus(t, id, domain.StatusRunning)
	sc := s.sidecar(id)
	sc.waitStarted(t)

	kill(false)
	sc.text(t, "m1", "Looking at the build.")
	sc.usage(t, 0.02, 9000)
	// The pause waits for the commands worker when that is the one stopped.
	pauseCmd := mustCommand(t, owner, agentcmd.PauseSession, id)
	paused := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
		defer cancel()
		r, err := s.client.Do(ctx, pauseCmd)
		if err == nil {
			err = r.Err()
		}
		paused <- err
	}()
	restart(false, id)
	require.NoError(t, <-paused)
	pause := sc.waitCommand(t, protocol.CommandPause, 1)
	sc.ack(t, pause[0], protocol.EventPauseAck)
	s.waitStatus(t, id, domain.StatusPaused)
	s.do(t, owner, domain.AggregateSession, agentcmd.ResumeSession, id, nil)
	resume := sc.waitCommand(t, protocol.CommandResume, 1)
	sc.ack(t, resume[0], protocol.EventResumeAck)
	s.waitStatus(t, id, domain.StatusRunning)
	sc.turnCompleted(t, true)
	sc.end(t, "completed")
	require.Eventually(t, func() bool { return s.session(t, id).HasPendingReview() }, wait, 20*time.Millisecond)
	s.do(t, owner, domain.AggregateSession, agentcmd.ApproveOutput, id, nil)
	s.waitStatus(t, id, domain.StatusCompleted)
	s.waitEvent(t, domain.AggregateSession, id, "session_released")

	got := s.session(t, id)
	cmds := sc.commands(t)
	ids := map[string]bool{}
	for _, c := range cmds {
		ids[c.CommandID] = true
	}
	evs := s.events(t, domain.AggregateSession, id)
	slices.Sort(evs) // the pause may overtake the usage report while a worker is down
	return flowResult{Status: got.Status(), PendingReview: got.HasPendingReview(), Cost: got.Metrics().TotalCostUsd,
		Events: evs, Activity: s.activity(t, id), Commands: types(cmds), CommandsUnique: len(ids) == len(cmds)}
}

// count returns how many of got are want.
func count(got []string, want string) int {
	n := 0
	for _, g := range got {
		if g == want {
			n++
		}
	}
	return n
}
