package commands_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
)

func TestStartSessionComposesTemplateAndSkills(t *testing.T) {
	h := startWorker(t, 0)
	base := h.newSkill(t, "Go style")
	extra := h.newSkill(t, "SQL")
	data := templateData()
	data.DefaultSkillIDs = []uuid.UUID{base}
	tmpl := h.newTemplate(t, data)

	start := startData()
	start.BudgetCapUsd = 0
	start.TemplateID = &tmpl
	start.SkillIDs = []uuid.UUID{extra}
	res := ok[command.StartSessionResult](t, h, domain.AggregateSession, command.StartSession, uuid.New(), start)
	s := res.Session
	assert.Equal(t, &tmpl, s.TemplateID)
	assert.Equal(t, []uuid.UUID{base, extra}, s.EnabledSkillIDs, "the template's skills come first")
	assert.Equal(t, "claude-opus-4-6", s.ModelID, "the template's model")
	assert.Equal(t, domain.Dollars(3), s.Budget.HardCapUsd, "the template's budget")

	start.BudgetCapUsd, start.ModelID = domain.Dollars(7), "claude-sonnet-4-5"
	s = ok[command.StartSessionResult](t, h, domain.AggregateSession, command.StartSession, uuid.New(), start).Session
	assert.Equal(t, domain.Dollars(7), s.Budget.HardCapUsd, "the command's budget wins")
	assert.Equal(t, "claude-sonnet-4-5", s.ModelID)

	adHoc := startData()
	adHoc.SkillIDs = []uuid.UUID{extra, base}
	s = ok[command.StartSessionResult](t, h, domain.AggregateSession, command.StartSession, uuid.New(), adHoc).Session
	assert.Equal(t, []uuid.UUID{extra, base}, s.EnabledSkillIDs)
	assert.Nil(t, s.TemplateID)
}

func TestStartSessionRefusesWhatItCannotCompose(t *testing.T) {
	h := startWorker(t, 0)
	active := h.newSkill(t, "Go style")
	inactive := h.newSkill(t, "Old habits")
	ok[command.SkillState](t, h, domain.AggregateSkill, command.DeactivateSkill, inactive, nil)
	tmpl := h.newTemplate(t, templateData())
	retired := h.newTemplate(t, templateData())
	ok[command.TemplateState](t, h, domain.AggregateTemplate, command.DeactivateTemplate, retired, nil)
	withInactiveDefault := templateData()
	withInactiveDefault.DefaultSkillIDs = []uuid.UUID{inactive}
	stale := h.newTemplate(t, withInactiveDefault)
	theirTemplate := uuid.New()
	okAs[command.TemplateState](t, h, uuid.NewString(), domain.AggregateTemplate, command.CreateTemplate, theirTemplate, templateData())
	chain := uuid.New()
	first := h.newSession(t, false)
	ok[command.ChainState](t, h, domain.AggregateChain, command.CreateChain, chain, command.CreateChainData{FirstSessionID: first})
	ok[command.ChainState](t, h, domain.AggregateChain, command.CancelChain, chain, nil)

	start := func(change func(*command.StartSessionData)) command.StartSessionData {
		d := startData()
		change(&d)
		return d
	}
	ss := func(name string, data command.StartSessionData, kind, field, status string) refusalCase {
		return refusalCase{name: name, aggregate: domain.AggregateSession, command: command.StartSession, id: uuid.New(),
			data: data, kind: kind, field: field, status: status}
	}
	h.checkRefusals(t, []refusalCase{
		ss("deactivated template", start(func(d *command.StartSessionData) { d.TemplateID = &retired }), command.KindConflict, "", "Inactive"),
		ss("deactivated skill", start(func(d *command.StartSessionData) { d.SkillIDs = []uuid.UUID{active, inactive} }), command.KindConflict, "", "Inactive"),
		ss("deactivated skill with a template", start(func(d *command.StartSessionData) {
			d.TemplateID, d.SkillIDs = &tmpl, []uuid.UUID{inactive}
		}), command.KindConflict, "", "Inactive"),
		ss("template's default skill deactivated", start(func(d *command.StartSessionData) { d.TemplateID = &stale }), command.KindConflict, "", "Inactive"),
		ss("unknown template", start(func(d *command.StartSessionData) { id := uuid.New(); d.TemplateID = &id }), command.KindNotFound, "", ""),
		ss("another owner's template", start(func(d *command.StartSessionData) { d.TemplateID = &theirTemplate }), command.KindNotFound, "", ""),
		ss("unknown skill", start(func(d *command.StartSessionData) { d.SkillIDs = []uuid.UUID{uuid.New()} }), command.KindNotFound, "", ""),
		ss("skill twice", start(func(d *command.StartSessionData) { d.SkillIDs = []uuid.UUID{active, active} }), command.KindValidation, "enabledSkillIds", ""),
		ss("unknown chain", start(func(d *command.StartSessionData) { id := uuid.New(); d.ChainID = &id }), command.KindNotFound, "", ""),
		ss("cancelled chain", start(func(d *command.StartSessionData) { d.ChainID = &chain }), command.KindConflict, "", "Cancelled"),
		{name: "id taken", aggregate: domain.AggregateSession, command: command.StartSession, id: first, data: startData(), kind: command.KindConflict},
	})
}

func TestEnableSkillOnSession(t *testing.T) {
	h := startWorker(t, 0)
	skill := h.newSkill(t, "Go style")
	inactive := h.newSkill(t, "Old habits")
	ok[command.SkillState](t, h, domain.AggregateSkill, command.DeactivateSkill, inactive, nil)
	theirSkill := uuid.New()
	okAs[command.SkillState](t, h, uuid.NewString(), domain.AggregateSkill, command.CreateSkill, theirSkill,
		command.CreateSkillData{Name: "Theirs", Description: "Not yours"})
	queued := h.newSession(t, false)
	idle := h.newSession(t, true)
	h.internal(t, command.RecordTurnCompleted, idle, nil)

	s := h.session(t, command.EnableSkill, idle, command.SkillData{SkillID: skill})
	assert.Equal(t, []uuid.UUID{skill}, s.EnabledSkillIDs)
	assert.Contains(t, h.outboxTypes(t, idle), "session_skill_enabled")

	es := func(name string, id uuid.UUID, skill uuid.UUID, kind, field, status string) refusalCase {
		return refusalCase{name: name, aggregate: domain.AggregateSession, command: command.EnableSkill, id: id,
			data: command.SkillData{SkillID: skill}, kind: kind, field: field, status: status}
	}
	h.checkRefusals(t, []refusalCase{
		es("already enabled", idle, skill, command.KindConflict, "", "Idle"),
		es("deactivated skill", idle, inactive, command.KindConflict, "", "Idle"),
		es("session not idle", queued, skill, command.KindConflict, "", "Queued"),
		es("another owner's skill", idle, theirSkill, command.KindNotFound, "", ""),
		es("unknown skill", idle, uuid.New(), command.KindNotFound, "", ""),
		es("no skill", idle, uuid.Nil, command.KindValidation, "skillId", ""),
		{name: "another owner's session", aggregate: domain.AggregateSession, command: command.EnableSkill, id: idle,
			owner: uuid.NewString(), data: command.SkillData{SkillID: skill}, kind: command.KindNotFound},
	})
}

func TestAForkReachesOnlyItsOwnersSessionsAndRaisesSessionForked(t *testing.T) {
	h := startWorker(t, 0)
	mine := h.newSession(t, false)
	theirs := uuid.New()
	okAs[command.StartSessionResult](t, h, uuid.NewString(), domain.AggregateSession, command.StartSession, theirs, startData())

	fork := startData()
	fork.ForkedFrom = &domain.ForkPoint{SessionID: mine, Turn: 1}
	id := uuid.New()
	s := ok[command.StartSessionResult](t, h, domain.AggregateSession, command.StartSession, id, fork).Session
	assert.Equal(t, fork.ForkedFrom, s.ForkedFrom)
	assert.Contains(t, h.outboxTypes(t, id), "session_forked")

	fromTheirs, fromNowhere, badTurn := startData(), startData(), startData()
	fromTheirs.ForkedFrom = &domain.ForkPoint{SessionID: theirs, Turn: 1}
	fromNowhere.ForkedFrom = &domain.ForkPoint{SessionID: uuid.New(), Turn: 1}
	badTurn.ForkedFrom = &domain.ForkPoint{SessionID: mine, Turn: -1}
	ss := func(name string, data command.StartSessionData, kind, field string) refusalCase {
		return refusalCase{name: name, aggregate: domain.AggregateSession, command: command.StartSession, id: uuid.New(),
			data: data, kind: kind, field: field}
	}
	h.checkRefusals(t, []refusalCase{
		ss("another owner's session", fromTheirs, command.KindNotFound, ""),
		ss("no such session", fromNowhere, command.KindNotFound, ""),
		ss("a negative turn", badTurn, command.KindValidation, "forkedFrom.turn"),
	})
}
