package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agentbus/agentbus/internal/client"
)

// Templates runs `agentbus templates <subcommand>`.
func Templates(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return dispatch(ctx, "templates", templateCommands, args, stdout, stderr)
}

var templateCommands = []subcommand{
	{"ls [--active|--inactive]", "list your templates", catalogList(client.Templates, printTemplates)},
	{"show ID", "show a template: model, prompt, tools, budget, tool approval, schedule and its next run", templatesShow},
	{"create NAME --model M --budget USD --tools T,T [...]", "create a template; prints its id", templatesCreate},
	{"edit ID [--name N] [--model M] [--budget USD] [...]", "change the fields given; prints the id and new version", templatesEdit},
	{"activate ID", "let sessions start from the template again", catalogActivate(client.Templates, true)},
	{"deactivate ID", "stop sessions (and its schedule) from starting from the template", catalogActivate(client.Templates, false)},
}

func printTemplates(e *env, raw []byte) error {
	var list client.TemplateList
	if err := decodeInto(raw, &list); err != nil {
		return err
	}
	t := newTable(e.out, "ID", "NAME", "MODEL", "BUDGET", "ACTIVE", "SCHEDULED", "UPDATED")
	for _, tm := range list.Items {
		t.row(tm.ID, tm.Name, tm.ModelID, usd(tm.DefaultBudgetCapUsd), yesNo(tm.IsActive), yesNo(tm.Scheduled), when(tm.UpdatedAt))
	}
	return t.flush()
}

func templatesShow(e *env, fs *flag.FlagSet, args []string) error {
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	tm, err := client.Get[client.Template](e.ctx, e.client, client.Templates, pos[0])
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(tm.JSON)
	}
	v := tm.Value
	t := newTable(e.out)
	t.row("ID", v.ID)
	t.row("Name", v.Name)
	t.row("Description", oneLine(v.Description, 100))
	t.row("Active", yesNo(v.IsActive))
	t.row("Version", fmt.Sprint(v.Version))
	t.row("Model", v.ModelID)
	t.row("Budget", fmt.Sprintf("%s (warn at %d%%)", usd(v.DefaultBudgetCapUsd), v.WarnAtPercent))
	t.row("Tools", strings.Join(v.AllowedTools, ", "))
	t.row("Skills", strings.Join(v.DefaultSkillIDs, ", "))
	t.row("Tool approval", toolApprovalText(v.ToolApproval))
	t.row("Plan approval", yesNo(v.PlanApprovalRequired))
	t.row("Schedule", scheduleText(v.Schedule, v.NextRunAt))
	t.row("Prompt", oneLine(v.SystemPrompt, 100))
	t.row("Updated", when(v.UpdatedAt))
	return t.flush()
}

// templateFlags declares the flags of a template's fields on fs; the
// function returned gives the change they make: only the fields given.
func templateFlags(fs *flag.FlagSet) func() (client.TemplateChange, error) {
	var c client.TemplateChange
	name := fs.String("name", "", "the template's name")
	description := fs.String("description", "", "what the template is for (a scheduled session's objective)")
	model := fs.String("model", "", "the model of its sessions")
	prompt := fs.String("prompt", "", "the system prompt of every session")
	promptFile := fs.String("prompt-file", "", "read the system prompt from this file")
	budget := fs.Float64("budget", 0, "each session's budget cap, in USD")
	warn := fs.Int("warn-at", 0, "the percent of the cap at which you are warned")
	tools := fs.String("tools", "", "the tools the agent may use, comma-separated (such as Read,Edit,Bash)")
	var skills listFlag
	fs.Var(&skills, "skill", "a skill enabled on every session (repeatable)")
	planApproval := fs.Bool("plan-approval", false, "plans wait for your approval")
	schedule := fs.String("schedule", "", "a five-field cron expression: start a session at each due time")
	timeZone := fs.String("time-zone", "UTC", "the IANA time zone the schedule is read in")
	noSchedule := fs.Bool("no-schedule", false, "remove the schedule (edit)")
	approval := toolApprovalFlags(fs)
	return func() (client.TemplateChange, error) {
		var err error
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "name":
				c.Name = name
			case "description":
				c.Description = description
			case "model":
				c.ModelID = model
			case "prompt":
				c.SystemPrompt = prompt
			case "prompt-file":
				var b []byte
				if b, err = os.ReadFile(*promptFile); err == nil {
					text := string(b)
					c.SystemPrompt = &text
				}
			case "budget":
				c.DefaultBudgetCapUsd = budget
			case "warn-at":
				c.WarnAtPercent = warn
			case "tools":
				list := splitList(*tools)
				c.AllowedTools = &list
			case "plan-approval":
				c.PlanApprovalRequired = planApproval
			case "schedule":
				c.Schedule = &client.Schedule{CronExpression: *schedule, TimeZone: *timeZone, IsEnabled: true}
			case "no-schedule":
				c.RemoveSchedule = *noSchedule
			}
		})
		if err != nil {
			return c, usageError("--prompt-file: %v", err)
		}
		c.DefaultSkillIDs = skills
		c.ToolApproval, err = approval()
		return c, err
	}
}

func templatesCreate(e *env, fs *flag.FlagSet, args []string) error {
	change := templateFlags(fs)
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	c, err := change()
	if err != nil {
		return err
	}
	if c.Name != nil {
		return usageError("templates create: the name is the argument, not --name")
	}
	c.Name = &pos[0]
	tm, err := client.Create[client.Template](e.ctx, e.client, client.Templates, c)
	return printEntry(e, tm, err, false)
}

func templatesEdit(e *env, fs *flag.FlagSet, args []string) error {
	change := templateFlags(fs)
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	c, err := change()
	if err != nil {
		return err
	}
	if len(c.DefaultSkillIDs) > 0 {
		return usageError("templates edit: skills are not changed by edit (the API adds and removes them one by one)")
	}
	tm, err := client.Update[client.Template](e.ctx, e.client, client.Templates, pos[0], c)
	return printEntry(e, tm, err, true)
}

func toolApprovalText(a *client.ToolApproval) string {
	if a == nil || a.Mode == "" || a.Mode == "None" {
		return "none"
	}
	what := "every tool"
	if a.Mode == "List" {
		what = strings.Join(a.Tools, ", ")
	}
	return fmt.Sprintf("%s (waits %ds, then %s)", what, a.TimeoutSeconds, a.OnTimeout)
}
