package commands_test

import (
	"context"
	"encoding/json"
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

func TestCreateAgentTask(t *testing.T) {
	h := startWorker(t, 0)
	id := h.newSession(t, true)
	linked := uuid.New()
	cmd, err := command.New(domain.AggregateSession, command.CreateAgentTask, id, h.owner.String(), command.AgentTaskData{
		Title: "  Add retries to the webhook client ", Description: "It fails on 503.", Priority: command.TaskPriorityHigh,
		Tags: []string{"http", "http", "flaky"}, LinkedTaskID: &linked})
	require.NoError(t, err)
	var first command.AgentTaskResult
	for i := range 2 {
		wait, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r, err := h.client.Do(wait, cmd)
		cancel()
		require.NoError(t, err)
		require.NoError(t, r.Err())
		var res command.AgentTaskResult
		require.NoError(t, json.Unmarshal(r.State, &res))
		if i == 0 {
			first = res
			continue
		}
		assert.Equal(t, first, res, "a repeated command names the same task")
	}
	assert.NotEqual(t, uuid.Nil, first.TaskID)
	assert.Equal(t, id, first.SessionID)
	assert.Equal(t, command.AgentTaskData{Title: "Add retries to the webhook client", Description: "It fails on 503.",
		Priority: command.TaskPriorityHigh, Tags: []string{"http", "flaky"}, LinkedTaskID: &linked}, first.Task)

	var e domain.AgentAPITaskCreatedEvent
	h.outboxData(t, id, "agent_api_task_created", &e)
	assert.Equal(t, first.TaskID, e.CreatedTaskID)
	assert.Equal(t, &linked, e.LinkedTaskID)
	assert.Equal(t, "AgentApi", e.Source)
	assert.Equal(t, []any{"Add retries to the webhook client", "It fails on 503.", command.TaskPriorityHigh, []string{"http", "flaky"}},
		[]any{e.Title, e.Description, e.Priority, e.Tags}, "the event carries the task for the context that creates it")
	assert.Equal(t, h.owner, e.OwnerID)
	assert.Equal(t, 1, count(h.outboxTypes(t, id), "agent_api_task_created"), "a repeated command raises nothing")

	medium := ok[command.AgentTaskResult](t, h, domain.AggregateSession, command.CreateAgentTask, id, command.AgentTaskData{Title: "Tidy"})
	assert.Equal(t, command.TaskPriorityMedium, medium.Task.Priority, "the default priority")

	task := func(change func(*command.AgentTaskData)) command.AgentTaskData {
		d := command.AgentTaskData{Title: "Follow up", Priority: command.TaskPriorityLow}
		change(&d)
		return d
	}
	queued := h.newSession(t, false)
	tc := func(name string, data command.AgentTaskData, kind, field string) refusalCase {
		return refusalCase{name: name, aggregate: domain.AggregateSession, command: command.CreateAgentTask, id: id, data: data, kind: kind, field: field}
	}
	h.checkRefusals(t, []refusalCase{
		tc("no title", task(func(d *command.AgentTaskData) { d.Title = " " }), command.KindValidation, "title"),
		tc("title too long", task(func(d *command.AgentTaskData) { d.Title = strings.Repeat("x", 201) }), command.KindValidation, "title"),
		tc("description too long", task(func(d *command.AgentTaskData) { d.Description = strings.Repeat("x", 4001) }), command.KindValidation, "description"),
		tc("unknown priority", task(func(d *command.AgentTaskData) { d.Priority = "Someday" }), command.KindValidation, "priority"),
		tc("too many tags", task(func(d *command.AgentTaskData) { d.Tags = strings.Split("a b c d e f g h i j k", " ") }), command.KindValidation, "tags"),
		tc("empty tag", task(func(d *command.AgentTaskData) { d.Tags = []string{"ok", ""} }), command.KindValidation, "tags[1]"),
		tc("nil linked task", task(func(d *command.AgentTaskData) { d.LinkedTaskID = &uuid.Nil }), command.KindValidation, "linkedTaskId"),
		{name: "session not running", aggregate: domain.AggregateSession, command: command.CreateAgentTask, id: queued,
			data: task(func(*command.AgentTaskData) {}), kind: command.KindConflict, status: "Queued"},
		{name: "another owner's session", aggregate: domain.AggregateSession, command: command.CreateAgentTask, id: id, owner: uuid.NewString(),
			data: task(func(*command.AgentTaskData) {}), kind: command.KindNotFound},
	})
	assert.Equal(t, 2, count(h.outboxTypes(t, id), "agent_api_task_created"), "refusals raise nothing")
}

func TestHandOff(t *testing.T) {
	h := startWorker(t, 0)
	doc := command.HandOffData{Reason: "Context polluted by failed approaches", Summary: "Tried two fixes for the flaky test.",
		RemainingWork: "Find the race in cache.go.", KeyDecisions: "Not a mutex per key: it deadlocks."}

	t.Run("without a chain", func(t *testing.T) {
		id := h.newSession(t, true)
		res := ok[command.HandOffResult](t, h, domain.AggregateSession, command.HandOff, id, doc)
		assert.Equal(t, domain.StatusContextExhausted, res.Session.Status)
		chainID := command.ChainIDFor(id)
		require.NotNil(t, res.Session.ChainID)
		assert.Equal(t, chainID, *res.Session.ChainID, "the chain is created around the session")
		assert.Equal(t, id, res.HandoffDocument.FromSessionID)
		assert.Equal(t, doc.KeyDecisions, res.HandoffDocument.KeyDecisions)
		assert.True(t, res.HandoffDocument.IsPending())

		stored, err := postgres.Sessions{}.Get(context.Background(), h.pool, id)
		require.NoError(t, err)
		assert.Equal(t, res.Session.Version, stored.Version(), "the state is the stored one")
		c, err := postgres.Chains{}.Get(context.Background(), h.pool, chainID)
		require.NoError(t, err)
		pending, ok := c.PendingHandoff()
		require.True(t, ok)
		assert.Equal(t, res.HandoffDocument, pending)

		var e domain.SessionVoluntaryHandoffEvent
		h.outboxData(t, id, "session_voluntary_handoff", &e)
		assert.Equal(t, doc.Reason, e.Reason)
		assert.Equal(t, []string{"session_chain_created", "session_handoff_initiated"}, h.outboxTypes(t, chainID))
	})

	t.Run("in a chain", func(t *testing.T) {
		id := h.newSession(t, true)
		chainID := uuid.New()
		okAs[command.ChainState](t, h, "", domain.AggregateChain, command.CreateChain, chainID, command.CreateChainData{FirstSessionID: id})
		res := ok[command.HandOffResult](t, h, domain.AggregateSession, command.HandOff, id, doc)
		assert.Equal(t, &chainID, res.Session.ChainID)
		assert.Contains(t, h.outboxTypes(t, chainID), "session_handoff_initiated")
	})

	id := h.newSession(t, true)
	handoff := func(change func(*command.HandOffData)) command.HandOffData {
		d := doc
		change(&d)
		return d
	}
	hc := func(name string, data command.HandOffData, kind, field string) refusalCase {
		return refusalCase{name: name, aggregate: domain.AggregateSession, command: command.HandOff, id: id, data: data, kind: kind, field: field}
	}
	h.checkRefusals(t, []refusalCase{
		hc("no reason", handoff(func(d *command.HandOffData) { d.Reason = "" }), command.KindValidation, "reason"),
		hc("no summary", handoff(func(d *command.HandOffData) { d.Summary = " " }), command.KindValidation, "summary"),
		hc("no remaining work", handoff(func(d *command.HandOffData) { d.RemainingWork = "" }), command.KindValidation, "remainingWork"),
		hc("key decisions too long", handoff(func(d *command.HandOffData) { d.KeyDecisions = strings.Repeat("x", 4001) }), command.KindValidation, "keyDecisions"),
		{name: "another owner's session", aggregate: domain.AggregateSession, command: command.HandOff, id: id, owner: uuid.NewString(),
			data: doc, kind: command.KindNotFound},
		{name: "unknown session", aggregate: domain.AggregateSession, command: command.HandOff, id: uuid.New(), data: doc, kind: command.KindNotFound},
		{name: "session not running", aggregate: domain.AggregateSession, command: command.HandOff, id: h.newSession(t, false),
			data: doc, kind: command.KindConflict, status: "Queued"},
	})
	stored, err := postgres.Sessions{}.Get(context.Background(), h.pool, id)
	require.NoError(t, err)
	assert.Equal(t, domain.StatusRunning, stored.Status(), "a refused document leaves the session running")
	assert.Nil(t, stored.ChainID())
	ok[command.HandOffResult](t, h, domain.AggregateSession, command.HandOff, id, doc)
	h.checkRefusals(t, []refusalCase{
		{name: "hand off twice", aggregate: domain.AggregateSession, command: command.HandOff, id: id, data: doc,
			kind: command.KindConflict, status: "ContextExhausted"},
	})
}

func TestRecordAgentMemoryPill(t *testing.T) {
	h := startWorker(t, 0)
	skill, other := h.newSkill(t, "Go style"), h.newSkill(t, "SQL")
	withSkill := func(running bool) uuid.UUID {
		id := uuid.New()
		data := startData()
		data.SkillIDs = []uuid.UUID{skill}
		h.session(t, command.StartSession, id, data)
		if running {
			h.internal(t, command.AllocateSession, id, nil)
		}
		return id
	}
	id := withSkill(true)
	pill := command.RecordMemoryPillData{SessionID: id, Content: "go test -race catches the map race", Category: domain.PillTip}
	res := ok[command.MemoryPillResult](t, h, domain.AggregateSkill, command.RecordAgentMemoryPill, skill, pill)
	assert.Equal(t, skill, res.SkillID)
	assert.Equal(t, id, res.Pill.SessionID)
	assert.Equal(t, domain.PillActive, res.Pill.Status)
	assert.Equal(t, pill.Content, res.Pill.Content)
	assert.Contains(t, h.outboxTypes(t, skill), "memory_pill_recorded")

	idle := withSkill(true)
	h.internal(t, command.RecordTurnCompleted, idle, nil)
	with := func(change func(*command.RecordMemoryPillData)) command.RecordMemoryPillData {
		d := pill
		change(&d)
		return d
	}
	pc := func(name string, skillID uuid.UUID, data command.RecordMemoryPillData, kind, field, status string) refusalCase {
		return refusalCase{name: name, aggregate: domain.AggregateSkill, command: command.RecordAgentMemoryPill, id: skillID,
			data: data, kind: kind, field: field, status: status}
	}
	h.checkRefusals(t, []refusalCase{
		pc("skill not enabled on the session", other, pill, command.KindForbidden, "", ""),
		pc("unknown skill", uuid.New(), pill, command.KindForbidden, "", ""),
		pc("session not running", skill, with(func(d *command.RecordMemoryPillData) { d.SessionID = idle }), command.KindConflict, "", "Idle"),
		pc("no session", skill, with(func(d *command.RecordMemoryPillData) { d.SessionID = uuid.Nil }), command.KindValidation, "sessionId", ""),
		pc("unknown session", skill, with(func(d *command.RecordMemoryPillData) { d.SessionID = uuid.New() }), command.KindNotFound, "", ""),
		pc("empty content", skill, with(func(d *command.RecordMemoryPillData) { d.Content = " " }), command.KindValidation, "content", ""),
		pc("unknown category", skill, with(func(d *command.RecordMemoryPillData) { d.Category = "Rumour" }), command.KindValidation, "category", ""),
		{name: "another owner's session", aggregate: domain.AggregateSkill, command: command.RecordAgentMemoryPill, id: skill,
			owner: uuid.NewString(), data: pill, kind: command.KindNotFound},
	})
	stored, err := postgres.Skills{}.Get(context.Background(), h.pool, skill)
	require.NoError(t, err)
	assert.Len(t, stored.MemoryPills(), 1, "refusals record nothing")
}

func count(types []string, typ string) int {
	n := 0
	for _, t := range types {
		if t == typ {
			n++
		}
	}
	return n
}
