package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
	"github.com/agentbus/agentbus/postgres"
)

var templates postgres.Templates

// templateOp is one operation on a loaded template.
type templateOp[T any] func(ctx context.Context, tx pgx.Tx, t *domain.AgentTemplate, in T, at time.Time) error

// onTemplate adapts one operation on a template into a Handler: decode,
// load (hiding another owner's template), apply, save with the events.
func onTemplate[T any](now Clock, apply templateOp[T]) Handler {
	return func(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
		in, err := decode[T](cmd)
		if err != nil {
			return nil, err
		}
		t, err := templates.Update(ctx, tx, cmd.AggregateID, func(t *domain.AgentTemplate) error {
			if err := checkOwner(cmd, t.OwnerID().String(), "template"); err != nil {
				return err
			}
			return apply(ctx, tx, t, in, now().UTC())
		})
		if err != nil {
			return nil, err
		}
		return templateState(t), nil
	}
}

// simpleTemplateOp is an operation without parameters.
func simpleTemplateOp(op func(*domain.AgentTemplate, time.Time) error) templateOp[none] {
	return func(_ context.Context, _ pgx.Tx, t *domain.AgentTemplate, _ none, at time.Time) error {
		return op(t, at)
	}
}

func registerTemplate(d *Dispatcher, now Clock) {
	reg := func(name string, h Handler) { d.Register(domain.AggregateTemplate, name, h) }
	reg(command.CreateTemplate, createTemplate(now))
	reg(command.UpdateTemplate, onTemplate(now, updateTemplate))
	reg(command.ActivateTemplate, onTemplate(now, simpleTemplateOp((*domain.AgentTemplate).Activate)))
	reg(command.DeactivateTemplate, onTemplate(now, simpleTemplateOp((*domain.AgentTemplate).Deactivate)))
	reg(command.RemoveRule, onTemplate(now, func(_ context.Context, _ pgx.Tx, t *domain.AgentTemplate, in command.RuleIDData, at time.Time) error {
		return t.RemoveClassificationRule(in.RuleID, at)
	}))
	reg(command.AddTool, onTemplate(now, func(_ context.Context, _ pgx.Tx, t *domain.AgentTemplate, in command.ToolDefinition, at time.Time) error {
		tool, err := toolDefinition(in)
		if err != nil {
			return err
		}
		return t.AddCustomToolDefinition(tool, at)
	}))
	reg(command.RemoveTool, onTemplate(now, func(_ context.Context, _ pgx.Tx, t *domain.AgentTemplate, in command.ToolNameData, at time.Time) error {
		return t.RemoveCustomToolDefinition(in.ToolName, at)
	}))
	reg(command.AddTemplateSkill, onTemplate(now, func(ctx context.Context, tx pgx.Tx, t *domain.AgentTemplate, in command.SkillData, at time.Time) error {
		if err := required("skillId", in.SkillID); err != nil {
			return err
		}
		if _, err := ownedSkill(ctx, tx, in.SkillID, t.OwnerID()); err != nil {
			return err
		}
		return t.AddDefaultSkill(in.SkillID, at)
	}))
	reg(command.RemoveTemplateSkill, onTemplate(now, func(_ context.Context, _ pgx.Tx, t *domain.AgentTemplate, in command.SkillData, at time.Time) error {
		return t.RemoveDefaultSkill(in.SkillID, at)
	}))
	reg(command.AddRule, addRule(now))
}

// addRule adds a classification rule. Its id is derived from the command
// id unless the sender chose one, so a repeated command adds the same rule.
func addRule(now Clock) Handler {
	return func(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
		return onTemplate(now, func(_ context.Context, _ pgx.Tx, t *domain.AgentTemplate, in command.RuleData, at time.Time) error {
			return t.AddClassificationRule(rule(in, cmd.ID, 0), at)
		})(ctx, tx, cmd)
	}
}

// rule builds a classification rule; without an id it gets the i-th id
// derived from the command.
func rule(in command.RuleData, cmdID uuid.UUID, i int) domain.ClassificationRule {
	id := in.RuleID
	if id == uuid.Nil {
		id = uuid.NewSHA1(cmdID, fmt.Appendf(nil, "rule/%d", i))
	}
	return domain.ClassificationRule{ID: id, MatchField: in.MatchField, MatchPattern: in.MatchPattern,
		ClassifyAs: in.ClassifyAs, MinPriority: in.MinPriority}
}

// createTemplate creates an active template; its default skills must be
// the owner's.
func createTemplate(now Clock) Handler {
	return func(ctx context.Context, tx pgx.Tx, cmd command.Command) (any, error) {
		in, err := decode[command.CreateTemplateData](cmd)
		if err != nil {
			return nil, err
		}
		owner, err := parseOwner(cmd)
		if err != nil {
			return nil, err
		}
		tools, err := toolDefinitions("customToolDefinitions", in.CustomToolDefinitions)
		if err != nil {
			return nil, err
		}
		rules := make([]domain.ClassificationRule, 0, len(in.ClassificationRules))
		for i, r := range in.ClassificationRules {
			rules = append(rules, rule(r, cmd.ID, i))
		}
		t, err := domain.NewAgentTemplate(domain.NewTemplateParams{
			ID: cmd.AggregateID, OwnerID: owner, Name: in.Name, Description: in.Description, ModelID: in.ModelID,
			SystemPrompt: in.SystemPrompt, AllowedTools: in.AllowedTools,
			DefaultBudget: domain.SessionBudget{HardCapUsd: in.DefaultBudgetCapUsd, WarnAtPercent: in.WarnAtPercent},
			CustomTools:   tools, DefaultSkillIDs: in.DefaultSkillIDs, DefaultAutoContinue: in.DefaultAutoContinue,
			PlanApprovalRequired: in.PlanApprovalRequired, ClassificationRules: rules, Schedule: in.Schedule,
			ToolApproval: in.ToolApproval, Timeouts: in.Timeouts, SandboxLimits: in.SandboxLimits, Now: now().UTC(),
		})
		if err != nil {
			return nil, err
		}
		if _, err := ownedSkills(ctx, tx, t.DefaultSkillIDs(), owner); err != nil {
			return nil, err
		}
		if err := created(templates.Add(ctx, tx, t), "AgentTemplate", t.ID()); err != nil {
			return nil, err
		}
		return templateState(t), nil
	}
}

// updateTemplate applies the fields that are set, all or nothing. A new
// cap or warning threshold keeps the other half of the default budget.
func updateTemplate(_ context.Context, _ pgx.Tx, t *domain.AgentTemplate, in command.UpdateTemplateData, at time.Time) error {
	u := domain.TemplateUpdate{Name: in.Name, Description: in.Description, ModelID: in.ModelID,
		SystemPrompt: in.SystemPrompt, AllowedTools: in.AllowedTools, PlanApprovalRequired: in.PlanApprovalRequired,
		DefaultAutoContinue: in.DefaultAutoContinue, ToolApproval: in.ToolApproval, Timeouts: in.Timeouts,
		SandboxLimits: in.SandboxLimits}
	if in.DefaultBudgetCapUsd != nil || in.WarnAtPercent != nil {
		b := t.DefaultBudget()
		if in.DefaultBudgetCapUsd != nil {
			b.HardCapUsd = *in.DefaultBudgetCapUsd
		}
		if in.WarnAtPercent != nil {
			b.WarnAtPercent = *in.WarnAtPercent
		}
		u.DefaultBudget = &b
	}
	schedule := in.Schedule != nil || in.RemoveSchedule
	if u == (domain.TemplateUpdate{}) && !schedule {
		return &domain.ValidationError{FieldName: "name", Message: "give at least one field to change"}
	}
	if u != (domain.TemplateUpdate{}) {
		if err := t.Update(u, at); err != nil {
			return err
		}
	}
	if schedule {
		return t.UpdateSchedule(in.Schedule, at)
	}
	return nil
}
